//! A real `redis-server` for the unit tests of the shared store and its users (the Debian
//! package, installed by scripts/install-debian.sh when missing): started on a free port in a
//! scratch folder with nothing persisted, killed on drop.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

/// A running `redis-server`.
pub struct TestRedis {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
}

fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/install-debian.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg("redis-server=redis-server,redis-cli")
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/install-debian.sh");
        assert!(
            out.status.success(),
            "installing redis-server failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

impl TestRedis {
    /// Start one and wait (bounded) until it accepts connections.
    pub fn start() -> TestRedis {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        TestRedis::start_on(port)
    }

    /// [`TestRedis::start`] on `port` (a store coming back where it was).
    pub fn start_on(port: u16) -> TestRedis {
        install();
        let dir = std::env::temp_dir().join(format!("mcpmux-redis-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server never listened on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        TestRedis {
            port,
            child: Some(child),
            dir,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kill it now (the store is down from here on).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Every key and its value (strings, hashes' fields and values, sets' members) as text, via
    /// `redis-cli`, for tests that look for what must never be there.
    pub fn dump(&self) -> String {
        let cli = |args: &[&str]| {
            let out = Command::new("redis-cli")
                .args(["-p", &self.port.to_string(), "--raw"])
                .args(args)
                .output()
                .expect("run redis-cli");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let mut all = String::new();
        for key in cli(&["--scan"]).lines().filter(|k| !k.is_empty()) {
            let value = match cli(&["TYPE", key]).trim() {
                "hash" => cli(&["HGETALL", key]),
                "set" => cli(&["SMEMBERS", key]),
                _ => cli(&["GET", key]),
            };
            all.push_str(&format!("{key}\n{value}\n"));
        }
        all
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
