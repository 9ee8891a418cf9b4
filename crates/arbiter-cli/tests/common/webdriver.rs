//! A real browser for the end-to-end tests: headless Chromium from the distribution's
//! packages (`chromium`, `chromium-driver`, installed by `.ci/run`), driven over WebDriver
//! (the W3C protocol `chromedriver` speaks) by a small client on reqwest.
//!
//! [`ChromeDriver::start`] runs `chromedriver` on a free loopback port, in a process group
//! of its own that is killed (with the browsers it started) when it is dropped;
//! [`ChromeDriver::browser`] opens a headless browser session with a profile of its own:
//! navigate, find elements by CSS, read their text and attributes, click, type, run a
//! script, take a screenshot of the whole page, close.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

/// Where Debian puts the driver.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The key under which WebDriver names an element.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long the waits of a test poll before they fail.
pub const WAIT: Duration = Duration::from_secs(20);

/// A running `chromedriver`; it and every browser it started are killed on drop.
pub struct ChromeDriver {
    child: Child,
    url: String,
    http: reqwest::Client,
    profiles: tempfile::TempDir,
    log: PathBuf,
}

/// Whether Chromium and its driver are installed.
fn installed() -> bool {
    Path::new(CHROMEDRIVER).exists()
        && ["/usr/bin/chromium", "/usr/lib/chromium/chromium"].iter().any(|p| Path::new(p).exists())
}

impl ChromeDriver {
    /// The driver, or `None` after recording `test` as skipped when Chromium is not
    /// installed (on CI, where `.ci/run` installs it, its absence fails the test).
    pub async fn start(test: &str) -> Option<ChromeDriver> {
        if !installed() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must have Chromium and its driver: apt-get install chromium chromium-driver (.ci/run does)"
            );
            super::skip(test, "Chromium is not installed (apt-get install chromium chromium-driver)");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let profiles = tempfile::Builder::new().prefix("arbiter-browser-").tempdir().unwrap();
        let log = profiles.path().join("chromedriver.log");
        let child = {
            use std::os::unix::process::CommandExt;
            Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .arg(format!("--log-path={}", log.display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("start chromedriver")
        };
        let driver =
            ChromeDriver { child, url: format!("http://127.0.0.1:{port}"), http: super::http(), profiles, log };
        let started = Instant::now();
        loop {
            let ready = match driver.http.get(format!("{}/status", driver.url)).send().await {
                Ok(r) => r.json::<Value>().await.is_ok_and(|v| v["value"]["ready"] == true),
                Err(_) => false,
            };
            if ready {
                return Some(driver);
            }
            assert!(started.elapsed() < WAIT, "chromedriver never became ready; its log:\n{}", driver.log_text());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A new headless browser of `width`×`height` pixels, with a profile of its own (no
    /// cookie of another session).
    pub async fn browser(&self, width: u32, height: u32) -> Browser {
        let profile = tempfile::Builder::new().prefix("profile-").tempdir_in(self.profiles.path()).unwrap();
        let args = [
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-gpu".into(),
            "--no-first-run".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.keep().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"args": args},
        }}});
        let started = self.http.post(format!("{}/session", self.url)).json(&caps).send().await.unwrap();
        let answer: Value = started.json().await.unwrap();
        let id = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {answer}\n{}", self.log_text()))
            .to_string();
        Browser { http: self.http.clone(), session: format!("{}/session/{id}", self.url) }
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        // The driver and the browsers it started share its process group.
        let group = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// One browser session.
pub struct Browser {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
}

/// An element of the page a browser shows.
pub struct Element<'a> {
    browser: &'a Browser,
    id: String,
}

impl Browser {
    /// A WebDriver command; its `value`. Panics with the driver's message when it fails.
    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method.clone(), format!("{}{path}", self.session));
        if let Some(b) = &body {
            request = request.json(b);
        }
        let response = request.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or_else(|e| panic!("{method} {path}: not JSON: {e}"));
        assert!(status.is_success(), "{method} {path} {}: {status}: {}", body.unwrap_or_default(), answer["value"]);
        answer["value"].clone()
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.command(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Value {
        self.command(reqwest::Method::GET, path, None).await
    }

    /// Opens `url` and waits until it is loaded.
    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({"url": url})).await;
    }

    /// The address the browser shows.
    pub async fn url(&self) -> String {
        self.get("/url").await.as_str().unwrap_or_default().to_string()
    }

    pub async fn title(&self) -> String {
        self.get("/title").await.as_str().unwrap_or_default().to_string()
    }

    /// The HTTP status of the page shown (its navigation's response).
    pub async fn status(&self) -> u16 {
        let status =
            self.script("return performance.getEntriesByType('navigation')[0].responseStatus", json!([])).await;
        status.as_u64().unwrap_or_else(|| panic!("no status of the page: {status}")) as u16
    }

    /// Every element `css` matches, in document order.
    pub async fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self.post("/elements", json!({"using": "css selector", "value": css})).await;
        self.elements(found)
    }

    fn elements(&self, found: Value) -> Vec<Element<'_>> {
        found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e[ELEMENT].as_str())
            .map(|id| Element { browser: self, id: id.to_string() })
            .collect()
    }

    /// The first element `css` matches (panics when none does).
    pub async fn find(&self, css: &str) -> Element<'_> {
        match self.find_all(css).await.into_iter().next() {
            Some(e) => e,
            None => panic!("nothing matches {css:?} on {}:\n{}", self.url().await, self.body_text().await),
        }
    }

    /// Waits (up to [`WAIT`]) until `css` matches an element; the first one.
    pub async fn wait_for(&self, css: &str) -> Element<'_> {
        let started = Instant::now();
        loop {
            if let Some(e) = self.find_all(css).await.into_iter().next() {
                return e;
            }
            assert!(
                started.elapsed() < WAIT,
                "nothing matched {css:?} on {}:\n{}",
                self.url().await,
                self.body_text().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The visible text of the whole page.
    pub async fn body_text(&self) -> String {
        let found = self.post("/elements", json!({"using": "css selector", "value": "body"})).await;
        match self.elements(found).first() {
            Some(body) => body.text().await,
            None => String::new(),
        }
    }

    /// Runs `script` (a function body; its arguments in `arguments`) in the page; what it
    /// returns.
    pub async fn script(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args})).await
    }

    /// Runs `script`, which calls its last argument (`arguments[arguments.length - 1]`) with
    /// its result; that result.
    pub async fn async_script(&self, script: &str, args: Value) -> Value {
        self.post("/execute/async", json!({"script": script, "args": args})).await
    }

    /// Resizes the window.
    pub async fn resize(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({"width": width, "height": height})).await;
    }

    /// Saves a PNG of the whole page (beyond the window's height) at `path`.
    pub async fn screenshot(&self, path: &Path) {
        let shot = self
            .post(
                "/goog/cdp/execute",
                json!({"cmd": "Page.captureScreenshot", "params": {"format": "png", "captureBeyondViewport": true}}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap_or_default())
            .expect("a screenshot in base64");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// Ends the session (its browser exits).
    pub async fn quit(self) {
        self.command(reqwest::Method::DELETE, "", None).await;
    }
}

impl Element<'_> {
    fn path(&self, rest: &str) -> String {
        format!("/element/{}{rest}", self.id)
    }

    /// Its rendered text.
    pub async fn text(&self) -> String {
        self.browser.get(&self.path("/text")).await.as_str().unwrap_or_default().to_string()
    }

    /// An attribute (or property) of it; `None` when it has none.
    pub async fn attr(&self, name: &str) -> Option<String> {
        self.browser.get(&self.path(&format!("/attribute/{name}"))).await.as_str().map(str::to_string)
    }

    /// Every element inside it that `css` matches.
    pub async fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self.browser.post(&self.path("/elements"), json!({"using": "css selector", "value": css})).await;
        self.browser.elements(found)
    }

    pub async fn click(&self) {
        self.browser.post(&self.path("/click"), json!({})).await;
    }

    /// Types `text` into it (a field).
    pub async fn type_text(&self, text: &str) {
        self.browser.post(&self.path("/value"), json!({"text": text})).await;
    }
}
