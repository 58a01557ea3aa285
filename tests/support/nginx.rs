//! A fleet of Debian `nginx` instances on loopback ports, for the real-server comparison.
//!
//! Each instance runs in the foreground as the current user, in a prefix directory of its own
//! inside one temporary directory (config, pid file, logs and temp paths all there), as a
//! single process (`master_process off`) so that killing it leaves nothing behind. An instance
//! answers `GET /` after `echo_sleep` (the echo module, loaded from where Debian's
//! `libnginx-mod-http-echo` installs it) and answers 503 at once past its concurrency cap
//! (`limit_conn` on one zone per instance; idle keep-alive connections do not count, so the
//! cap is on requests in service). [`Fleet`] kills every instance when dropped, also while a
//! panic unwinds, and then removes its directory. [`Fleet::stop`] kills one instance (its port
//! then refuses every connection, a crashed server) and [`Fleet::restart`] starts it again on
//! the same port with the same config.
//!
//! On Linux each instance also dies with the thread that started it (`PR_SET_PDEATHSIG`, set
//! between fork and exec): when the process is killed outright (SIGKILL, or a signal it does
//! not handle), no `nginx` survives it, though the directory is then left (nothing runs to
//! remove it). Keep a [`Fleet`] on the thread that started it. Each instance runs in a process
//! group of its own, so a Ctrl-C at the terminal reaches the program alone, which stops its
//! fleet by dropping it (`examples/http_fleet.rs` does so on SIGINT and SIGTERM).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where Debian's `libnginx-mod-http-echo` installs the echo module.
pub const ECHO_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_echo_module.so";

/// How long an instance may take to answer its first request.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Attempts at starting an instance (a free port can be taken between probing and binding).
const START_ATTEMPTS: usize = 3;

/// Why the fleet cannot run here: what is missing, and how to install it.
#[derive(Debug)]
pub struct Missing(pub String);

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (install with `apt-get install -y nginx libnginx-mod-http-echo`)",
            self.0
        )
    }
}

/// The `nginx` binary: `/usr/sbin/nginx` (where Debian installs it, outside a non-root
/// `PATH`), else the first `nginx` on `PATH`.
pub fn nginx_binary() -> Result<PathBuf, Missing> {
    let debian = PathBuf::from("/usr/sbin/nginx");
    if debian.is_file() {
        return Ok(debian);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("nginx"))
        .find(|p| p.is_file())
        .ok_or_else(|| Missing("no nginx binary in /usr/sbin or on PATH".into()))
}

/// Checks that nginx and the echo module are installed.
pub fn available() -> Result<PathBuf, Missing> {
    let binary = nginx_binary()?;
    if !Path::new(ECHO_MODULE).is_file() {
        return Err(Missing(format!("no echo module at {ECHO_MODULE}")));
    }
    Ok(binary)
}

/// One running nginx instance.
#[derive(Debug)]
pub struct Instance {
    /// Its loopback port.
    pub port: u16,
    /// Requests it serves at once; more are answered 503.
    pub cap: u32,
    /// The running process; `None` while stopped ([`Fleet::stop`]). Behind a lock so that a
    /// shared fleet can be stopped and restarted while arms run over it.
    child: Mutex<Option<Child>>,
    prefix: PathBuf,
}

impl Instance {
    fn child(&self) -> MutexGuard<'_, Option<Child>> {
        self.child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether it runs (not stopped by [`Fleet::stop`]).
    pub fn running(&self) -> bool {
        self.child().is_some()
    }

    /// Kills the process and reaps it, if it runs.
    fn kill(&self) {
        if let Some(mut child) = self.child().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

/// Several nginx instances, killed on drop.
#[derive(Debug)]
pub struct Fleet {
    /// The instances, in the order of the caps given to [`Fleet::start`].
    pub instances: Vec<Instance>,
    /// The `nginx` binary, for [`Fleet::restart`].
    binary: PathBuf,
    /// Holds the prefix directories; declared last, so removed after the instances stop.
    dir: tempfile::TempDir,
}

impl Fleet {
    /// Starts one instance per cap, each serving `GET /` in `sleep_ms` milliseconds, and waits
    /// until every instance answers.
    pub fn start(caps: &[u32], sleep_ms: u64) -> Result<Fleet, String> {
        let binary = available().map_err(|m| m.to_string())?;
        if caps.contains(&0) {
            return Err("every instance cap must be at least 1".into());
        }
        let dir = tempfile::Builder::new()
            .prefix("nginx-fleet-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let mut fleet = Fleet {
            instances: Vec::with_capacity(caps.len()),
            binary: binary.clone(),
            dir,
        };
        for (i, &cap) in caps.iter().enumerate() {
            let prefix = fleet.dir.path().join(format!("instance-{i}"));
            let instance = start_instance(&binary, &prefix, cap, sleep_ms)?;
            fleet.instances.push(instance);
        }
        Ok(fleet)
    }

    /// The temporary directory that holds every instance's prefix (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills instance `i` (SIGKILL, as a crash): from then on its port refuses every
    /// connection, and requests in service on it end without an answer. Does nothing if it is
    /// stopped already.
    pub fn stop(&self, i: usize) -> Result<(), String> {
        self.instance(i)?.kill();
        Ok(())
    }

    /// Starts instance `i` again, on the same port with the same config, and waits until it
    /// answers, as [`Fleet::start`] does; does nothing if it runs. Call it on the thread that
    /// started the fleet (the instance dies with that thread).
    pub fn restart(&self, i: usize) -> Result<(), String> {
        let instance = self.instance(i)?;
        if instance.running() {
            return Ok(());
        }
        let conf = instance.prefix.join("nginx.conf");
        let mut last_error = String::new();
        // The port was just released: a socket still closing on it is no obstacle to nginx
        // (it binds with `SO_REUSEADDR`), but give a transient failure a second chance.
        for attempt in 0..START_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(100));
            }
            let child = spawn(&self.binary, &instance.prefix, &conf)?;
            *instance.child() = Some(child);
            match wait_until_answers(instance) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    instance.kill();
                    last_error = e;
                }
            }
        }
        Err(format!("restarting nginx-{i}: {last_error}"))
    }

    fn instance(&self, i: usize) -> Result<&Instance, String> {
        self.instances.get(i).ok_or_else(|| {
            format!(
                "no instance {i} in a fleet of {} instances",
                self.instances.len()
            )
        })
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for instance in &self.instances {
            instance.kill();
        }
    }
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("cannot bind a loopback port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("cannot read the bound port: {e}"))
}

/// The configuration of one instance: everything it writes stays under `prefix`.
fn config(prefix: &Path, port: u16, cap: u32, sleep_ms: u64) -> String {
    let p = prefix.display();
    let mut c = String::new();
    let _ = writeln!(c, "load_module {ECHO_MODULE};");
    let _ = writeln!(c, "master_process off;");
    let _ = writeln!(c, "worker_processes 1;");
    let _ = writeln!(c, "pid {p}/nginx.pid;");
    let _ = writeln!(c, "error_log {p}/logs/error.log warn;");
    let _ = writeln!(c, "events {{ worker_connections 4096; }}");
    let _ = writeln!(c, "http {{");
    let _ = writeln!(c, "  access_log off;");
    for temp in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let _ = writeln!(c, "  {temp}_temp_path {p}/temp/{temp};");
    }
    let _ = writeln!(c, "  keepalive_requests 1000000;");
    let _ = writeln!(c, "  keepalive_timeout 60s;");
    let _ = writeln!(c, "  limit_conn_zone $server_port zone=cap:1m;");
    let _ = writeln!(c, "  limit_conn_status 503;");
    let _ = writeln!(c, "  limit_conn_log_level info;");
    let _ = writeln!(c, "  server {{");
    let _ = writeln!(c, "    listen 127.0.0.1:{port};");
    let _ = writeln!(c, "    location / {{");
    let _ = writeln!(c, "      limit_conn cap {cap};");
    let _ = writeln!(c, "      echo_sleep {:.3};", sleep_ms as f64 / 1000.0);
    let _ = writeln!(c, "      echo ok;");
    let _ = writeln!(c, "    }}");
    let _ = writeln!(c, "  }}");
    let _ = writeln!(c, "}}");
    c
}

fn start_instance(
    binary: &Path,
    prefix: &Path,
    cap: u32,
    sleep_ms: u64,
) -> Result<Instance, String> {
    for dir in ["logs", "temp"] {
        std::fs::create_dir_all(prefix.join(dir))
            .map_err(|e| format!("cannot create {}: {e}", prefix.join(dir).display()))?;
    }
    let mut last_error = String::new();
    for _ in 0..START_ATTEMPTS {
        let port = free_port()?;
        let conf = prefix.join("nginx.conf");
        std::fs::write(&conf, config(prefix, port, cap, sleep_ms))
            .map_err(|e| format!("cannot write {}: {e}", conf.display()))?;
        let child = spawn(binary, prefix, &conf)?;
        let instance = Instance {
            port,
            cap,
            child: Mutex::new(Some(child)),
            prefix: prefix.to_path_buf(),
        };
        match wait_until_answers(&instance) {
            Ok(()) => return Ok(instance),
            Err(e) => {
                instance.kill();
                last_error = e;
            }
        }
    }
    Err(last_error)
}

/// Runs `nginx` in the foreground on the config `conf`, in `prefix`.
fn spawn(binary: &Path, prefix: &Path, conf: &Path) -> Result<Child, String> {
    let mut command = Command::new(binary);
    die_with_parent(&mut command);
    command
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(conf)
        .arg("-e")
        .arg(prefix.join("logs/error.log"))
        .arg("-g")
        .arg("daemon off;")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))
}

/// Puts the instance in a process group of its own (a Ctrl-C at the terminal is the program's
/// to handle) and, on Linux, has the kernel SIGKILL it when the thread that starts it exits:
/// also when the whole process is killed outright, with no chance to drop the [`Fleet`].
fn die_with_parent(command: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        command.process_group(0);
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: between fork and exec the closure calls only async-signal-safe functions
        // (`prctl`, `getppid`) and builds its errors without allocating.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the request took effect: nothing would signal us.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = command;
}

/// Polls `GET /` until a 200 comes back, the process exits, or [`START_TIMEOUT`] passes.
fn wait_until_answers(instance: &Instance) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, instance.port));
    loop {
        let exited = match instance.child().as_mut() {
            Some(child) => child.try_wait(),
            None => return Err(format!("nginx on port {} is stopped", instance.port)),
        };
        if let Ok(Some(status)) = exited {
            let log =
                std::fs::read_to_string(instance.prefix.join("logs/error.log")).unwrap_or_default();
            return Err(format!(
                "nginx on port {} exited ({status}): {}",
                instance.port,
                log.trim()
            ));
        }
        if probe(addr).unwrap_or(false) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "nginx on port {} did not answer within {START_TIMEOUT:?}",
                instance.port
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One `GET /` on a fresh connection: did it answer 200?
fn probe(addr: SocketAddr) -> std::io::Result<bool> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    Ok(response.starts_with(b"HTTP/1.1 200"))
}
