//! The sharpening exponent applied without `powf` where it is a whole number: the draw raises
//! every score to it, so it sits on the hot path.

/// The sharpening exponent, sorted into the cheapest way to apply it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Power {
    One,
    /// Whole exponents 2 to 64 (the defaults are 24 and 12) by repeated squaring: several
    /// times cheaper than `powf` on the hot path, within an ulp or two of it.
    Whole(u32),
    Real(f64),
}

impl Power {
    pub(crate) fn of(e: f64) -> Self {
        if e == 1.0 {
            Power::One
        } else if (2.0..=64.0).contains(&e) && (e as u32) as f64 == e {
            Power::Whole(e as u32)
        } else {
            Power::Real(e)
        }
    }

    #[inline]
    pub(crate) fn apply(self, x: f64) -> f64 {
        match self {
            Power::One => x,
            Power::Whole(n) => {
                let x = x.max(0.0);
                // The default exponents written out: the very products `powi` forms, in its
                // order (x^24 = x^8 x^16, x^12 = x^4 x^8), without its loop.
                match n {
                    24 => {
                        let x8 = square(square(square(x)));
                        x8 * square(x8)
                    }
                    12 => {
                        let x4 = square(square(x));
                        x4 * square(x4)
                    }
                    _ => powi(x, n),
                }
            }
            Power::Real(e) => x.max(0.0).powf(e),
        }
    }
}

/// `x^n` by repeated squaring, the same steps (so the same bits) as `f64::powi`, but inlined
/// where `powi` calls a runtime routine.
#[inline]
fn powi(mut x: f64, mut n: u32) -> f64 {
    let mut r = 1.0;
    loop {
        if n & 1 == 1 {
            r *= x;
        }
        n >>= 1;
        if n == 0 {
            return r;
        }
        x *= x;
    }
}

#[inline(always)]
fn square(x: f64) -> f64 {
    x * x
}
