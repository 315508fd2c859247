//! Runtime tests against real compiled guests (`tests/guests/raw-*`, built for
//! `wasm32-wasip2` on first use) and hand-made bad files.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use super::bindings::Reply;
use super::loader::LoadError;
use super::services::{GUEST_LOG_TARGET, NoServices};
use super::*;

/// A compiled test guest. `make test` builds every guest first and says where
/// (`KAPSEL_GUEST_DIR`); a plain `cargo test` builds them once, with the script that
/// knows them all (`scripts/build-guests`).
fn guest_wasm(lib_name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let file = format!("{lib_name}.wasm");
    let dir = BUILT.get_or_init(|| {
        if let Some(dir) = std::env::var_os("KAPSEL_GUEST_DIR").map(PathBuf::from)
            && dir.join(&file).exists()
        {
            return dir;
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("workspace root");
        let output = Command::new(workspace.join("scripts").join("build-guests"))
            .output()
            .expect("run scripts/build-guests");
        assert!(
            output.status.success(),
            "building the test guests failed (is `rustup target add wasm32-wasip2` done?):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    });
    dir.join(file)
}

/// One runtime for all tests, as in the host.
fn runtime() -> &'static Runtime {
    static RUNTIME: LazyLock<Runtime> =
        LazyLock::new(|| Runtime::new(crate::limits::Limits::default()).expect("runtime"));
    &RUNTIME
}

/// The behaviours guest, loaded once.
async fn behaviours() -> &'static Guest {
    static GUEST: OnceCell<Guest> = OnceCell::const_new();
    GUEST
        .get_or_init(|| async {
            runtime()
                .load(&guest_wasm("raw_behaviours"))
                .await
                .expect("load raw_behaviours")
        })
        .await
}

fn cause(handler_id: &str, body: &str) -> Cause {
    Cause {
        handler_id: handler_id.to_owned(),
        kind: HandlerKind::Event,
        resource: Resource {
            group: "kopf.dev".to_owned(),
            version: "v1".to_owned(),
            plural: "kopfexamples".to_owned(),
            kind: "KopfExample".to_owned(),
            namespaced: true,
        },
        event_type: Some(EventType::Added),
        reason: None,
        body: body.to_owned(),
        old: None,
        new: None,
        diff: None,
        retry: 0,
        started: "2026-11-30T00:00:00Z".to_owned(),
        runtime_seconds: 0.0,
        param: None,
        memo: None,
    }
}

const BODY: &str = r#"{"apiVersion":"kopf.dev/v1","kind":"KopfExample","metadata":{"name":"kex1","namespace":"default"}}"#;

fn ctx(handler_id: &str) -> CallContext {
    CallContext::new(
        handler_id,
        Some("default/kex1".to_owned()),
        Arc::new(NoServices),
    )
}

async fn call(handler_id: &str) -> Result<Reply, CallError> {
    behaviours()
        .await
        .invoke(cause(handler_id, BODY), ctx(handler_id))
        .await
}

#[tokio::test]
async fn describe_lists_the_guests_handlers() {
    let guest = behaviours().await;
    assert_eq!(guest.name(), "raw_behaviours");
    assert!(guest.path().ends_with("raw_behaviours.wasm"));
    let ids: Vec<&str> = guest
        .describe()
        .handlers
        .iter()
        .map(|h| h.id.as_str())
        .collect();
    assert_eq!(
        ids,
        ["ok", "spin", "hog", "crash", "log-and-lookup", "remember"]
    );
    let json = describe_json(
        guest.describe(),
        guest.spawning(),
        guest.logins(),
        (guest.everything(), guest.chosen()),
    );
    assert_eq!(json["sdk_version"], "raw-0");
    assert_eq!(json["handlers"][1]["deadline_ms"], 200);
    assert_eq!(json["handlers"][2]["memory_mib"], 16);
    assert_eq!(
        json["handlers"][0]["selectors"][0],
        serde_json::json!({"group": "kopf.dev", "plural": "kopfexamples"})
    );
}

#[tokio::test]
async fn ok_replies_with_a_result_and_a_patch() {
    let reply = call("ok").await.expect("ok");
    assert_eq!(
        reply.outcome,
        Outcome::Done(Some(r#"{"name":"kex1"}"#.to_owned()))
    );
    assert_eq!(
        reply.patch.as_deref(),
        Some(r#"{"metadata":{"labels":{"seen-by":"raw"}}}"#)
    );
    assert_eq!(reply.memo, None);
}

#[tokio::test]
async fn index_and_when_exports_answer() {
    let guest = behaviours().await;
    let outcome = guest
        .index(cause("ok", BODY), ctx("ok"))
        .await
        .expect("index");
    assert_eq!(
        outcome,
        IndexOutcome::Entries(vec![("\"key\"".to_owned(), "\"ok\"".to_owned())])
    );
    let yes = guest
        .when(cause("log-and-lookup", "yes"), ctx("log-and-lookup"))
        .await;
    assert!(yes.expect("when"));
    let no = guest
        .when(cause("log-and-lookup", "{}"), ctx("log-and-lookup"))
        .await;
    assert!(!no.expect("when"));
}

#[tokio::test]
async fn a_spinning_guest_is_stopped_at_its_deadline_and_the_guest_still_works() {
    let started = Instant::now();
    let error = call("spin").await.expect_err("spin must not finish");
    let elapsed = started.elapsed();
    assert!(
        matches!(error, CallError::Timeout { deadline } if deadline == Duration::from_millis(200)),
        "{error:?}"
    );
    // Not a timing assertion: the default deadline (5 s) would mean the registration's
    // 200 ms was ignored.
    assert!(
        elapsed < crate::limits::Limits::default().call_deadline,
        "took {elapsed:?}"
    );
    // A fresh store per call: the interrupted instance left nothing behind.
    assert!(call("ok").await.is_ok());
}

#[tokio::test]
async fn every_call_starts_from_the_guests_image_whatever_the_last_call_wrote() {
    // Memory is reset between calls in place (the pages a call wrote, up to a bound)
    // and by giving pages back (the rest): neither may leak a call's data to the next.
    for _ in 0..3 {
        let reply = call("remember").await.expect("remember");
        let Outcome::Done(Some(result)) = reply.outcome else {
            panic!("{:?}", reply.outcome);
        };
        assert_eq!(result, r#"{"calls_before":7,"nonzero":0}"#);
    }
}

#[tokio::test]
async fn a_hogging_guest_is_stopped_at_its_memory_cap() {
    let error = call("hog").await.expect_err("hog must not finish");
    assert!(
        matches!(error, CallError::MemoryExceeded { limit_mib: 16 }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "tried to use more than its memory cap of 16 MiB and was stopped"
    );
    assert!(call("ok").await.is_ok());
}

#[tokio::test]
async fn a_panicking_guest_traps_with_its_message() {
    let error = call("crash").await.expect_err("crash must fail");
    let CallError::Trap {
        message,
        stderr_tail,
    } = &error
    else {
        panic!("expected a trap, got {error:?}");
    };
    assert_eq!(message, "the guest panicked: boom");
    assert!(stderr_tail.contains("boom"), "{stderr_tail}");
    assert_eq!(error.to_string(), "the guest panicked: boom");
}

/// Services that answer one index and record what they were asked.
#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<String>>,
}

impl HostServices for Recording {
    fn index_lookup(&self, caller: &Caller, index: &str, key: &str) -> Option<Vec<String>> {
        let mut asked = self.asked.lock().expect("lock");
        asked.push(format!(
            "{}/{}/{} lookup {index} {key}",
            caller.guest,
            caller.handler_id,
            caller.object_ref()
        ));
        (index == "by-namespace" && key == "\"default\"").then(|| vec!["\"kex1\"".to_owned()])
    }

    fn index_keys(&self, _caller: &Caller, index: &str) -> Vec<String> {
        self.asked
            .lock()
            .expect("lock")
            .push(format!("keys {index}"));
        vec!["\"default\"".to_owned()]
    }
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn host_calls_reach_the_services_and_the_log() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    // The test runs on a current-thread runtime, so the thread-local subscriber sees the call.
    let _guard = tracing::subscriber::set_default(subscriber);

    let services = Arc::new(Recording::default());
    let ctx = CallContext::new(
        "log-and-lookup",
        Some("default/kex1".to_owned()),
        services.clone(),
    );
    let reply = behaviours()
        .await
        .invoke(cause("log-and-lookup", BODY), ctx)
        .await
        .expect("call");
    assert_eq!(
        reply.outcome,
        Outcome::Done(Some(
            r#"{"found":["\"kex1\""],"keys":["\"default\""]}"#.to_owned()
        ))
    );
    let asked = services.asked.lock().expect("lock").clone();
    assert_eq!(
        asked,
        [
            r#"raw_behaviours/log-and-lookup/default/kex1 lookup by-namespace "default""#,
            "keys by-namespace",
        ]
    );
    let log = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    let line = |needle: &str| {
        log.lines()
            .find(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{log}"))
            .to_owned()
    };
    let logged = line("looking up the index");
    assert!(
        logged.contains("INFO") && logged.contains(GUEST_LOG_TARGET),
        "{logged}"
    );
    for field in [
        "guest=\"raw_behaviours\"",
        "handler=\"log-and-lookup\"",
        "object=\"default/kex1\"",
    ] {
        assert!(logged.contains(field), "{field} missing in {logged}");
    }
    assert!(line("stdout line from the guest").contains("stream=\"stdout\""));
    assert!(line("stderr line from the guest").contains("WARN"));
}

#[tokio::test]
async fn concurrent_calls_each_get_their_own_instance() {
    let calls = (0..24).map(|_| call("ok"));
    let replies = futures::future::join_all(calls).await;
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
}

/// A scratch directory under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("kapsel-runtime-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        let mut file = std::fs::File::create(&path).expect("create");
        file.write_all(bytes).expect("write");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn bad_files_are_rejected_with_their_reason() {
    let scratch = Scratch::new("bad-files");
    let cases: [(&str, &[u8], &str); 4] = [
        ("empty.wasm", b"", "is empty"),
        (
            "random.wasm",
            b"\x13\x37 not a wasm file at all",
            "is not WebAssembly",
        ),
        (
            "core.wasm",
            b"\0asm\x01\0\0\0",
            "is a core WebAssembly module, not a component: build the guest with `cargo build --target wasm32-wasip2`",
        ),
        (
            "truncated.wasm",
            b"\0asm\x0d\0\x01\0\x07",
            "is not a valid WebAssembly component",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = scratch.file(name, bytes);
        let error = runtime().load(&path).await.expect_err(name);
        let text = error.to_string();
        assert_eq!(error.path(), path);
        assert!(text.starts_with(&path.display().to_string()), "{text}");
        assert!(text.contains(expected), "{name}: {text}");
    }
    let missing = scratch.0.join("missing.wasm");
    let error = runtime().load(&missing).await.expect_err("missing");
    assert!(matches!(error, LoadError::Unreadable { .. }), "{error:?}");
    let error = runtime()
        .load(&scratch.0)
        .await
        .expect_err("a directory is not a file");
    assert!(error.to_string().contains("not a regular file"), "{error}");
}

#[tokio::test]
async fn components_of_another_world_are_rejected_naming_what_differs() {
    let scratch = Scratch::new("other-world");
    let empty = scratch.file(
        "empty-component.wasm",
        &wat::parse_str("(component)").expect("wat"),
    );
    let error = runtime().load(&empty).await.expect_err("no exports");
    let text = error.to_string();
    assert!(text.contains("is not a Kapsel guest"), "{text}");
    assert!(
        text.contains("it does not export `describe`, `invoke`, `index`, `when`"),
        "{text}"
    );

    let foreign =
        wat::parse_str(r#"(component (import "acme:thing/api" (instance)))"#).expect("wat");
    let foreign = scratch.file("foreign.wasm", &foreign);
    let text = runtime()
        .load(&foreign)
        .await
        .expect_err("foreign import")
        .to_string();
    assert!(
        text.contains("it imports `acme:thing/api`, which this host does not provide"),
        "{text}"
    );

    let newer = wat::parse_str(r#"(component (import "kapsel:operator/host@0.2.0" (instance)))"#)
        .expect("wat");
    let newer = scratch.file("newer.wasm", &newer);
    let text = runtime()
        .load(&newer)
        .await
        .expect_err("newer contract")
        .to_string();
    assert!(
        text.contains(
            "built against kapsel:operator@0.2.0, this host provides kapsel:operator@0.1.0"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_failing_describe_is_a_load_error_naming_the_file() {
    let path = guest_wasm("raw_bad_describe");
    let error = runtime().load(&path).await.expect_err("describe panics");
    assert!(
        matches!(
            error,
            LoadError::Describe {
                source: CallError::Trap { .. },
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "{}: describe() failed: the guest panicked: describe is broken on purpose",
            path.display()
        )
    );
}

#[tokio::test]
async fn a_directory_loads_its_good_guests_and_reports_the_bad_ones() {
    let scratch = Scratch::new("directory");
    let good = std::fs::read(guest_wasm("raw_behaviours")).expect("read guest");
    scratch.file("good.wasm", &good);
    let bad = scratch.file("bad.wasm", b"definitely not wasm");
    scratch.file(".hidden.wasm", b"skipped");
    scratch.file("README.md", b"skipped");

    let (guests, errors) = runtime().load_all(std::slice::from_ref(&scratch.0)).await;
    let names: Vec<&str> = guests.iter().map(Guest::name).collect();
    assert_eq!(names, ["good"]);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path(), bad);
    assert!(matches!(errors[0], LoadError::NotWasm { .. }));

    let empty = Scratch::new("no-guests");
    let (guests, errors) = runtime().load_all(std::slice::from_ref(&empty.0)).await;
    assert!(guests.is_empty());
    assert!(
        matches!(errors.as_slice(), [LoadError::NoGuests { .. }]),
        "{errors:?}"
    );
}

#[tokio::test]
async fn a_mounted_configmap_loads_each_key_once_under_its_own_name() {
    // As the kubelet lays out a ConfigMap volume, caught in the middle of an update: the
    // files in a hidden timestamped folder, `..data` linking to it, one link per key
    // into `..data`, and the next version's folder with its `..data_tmp` link, not yet
    // swapped in.
    let scratch = Scratch::new("configmap");
    let good = std::fs::read(guest_wasm("raw_behaviours")).expect("read guest");
    let current = "..2026_12_01_17_00_00.123456789";
    let next = "..2026_12_01_17_05_00.987654321";
    for folder in [current, next] {
        std::fs::create_dir(scratch.0.join(folder)).expect("data folder");
        scratch.file(&format!("{folder}/first.wasm"), &good);
        scratch.file(&format!("{folder}/second.wasm"), &good);
    }
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, scratch.0.join(name)).expect("link");
    };
    link(current, "..data");
    link(next, "..data_tmp");
    link("..data/first.wasm", "first.wasm");
    link("..data/second.wasm", "second.wasm");

    let (guests, errors) = runtime().load_all(std::slice::from_ref(&scratch.0)).await;
    assert!(errors.is_empty(), "{errors:?}");
    let loaded: Vec<(&str, &Path)> = guests.iter().map(|g| (g.name(), g.path())).collect();
    // Each key once, by its link: the path that stays when the kubelet swaps `..data`.
    assert_eq!(
        loaded,
        [
            ("first", scratch.0.join("first.wasm").as_path()),
            ("second", scratch.0.join("second.wasm").as_path()),
        ]
    );
    let reply = guests[1]
        .invoke(cause("ok", BODY), ctx("ok"))
        .await
        .expect("call");
    assert!(matches!(reply.outcome, Outcome::Done(Some(_))));
}

/// `wasm` with a custom section of `padding` bytes appended: still the same component.
fn padded(wasm: &[u8], padding: usize) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = u8::try_from(n & 0x7f).expect("7 bits");
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"padding";
    let mut content = Vec::new();
    leb128(name.len(), &mut content);
    content.extend_from_slice(name);
    content.resize(content.len() + padding, 0);
    let mut out = wasm.to_vec();
    out.push(0); // a custom section
    leb128(content.len(), &mut out);
    out.extend_from_slice(&content);
    out
}

#[tokio::test]
async fn a_guest_too_large_for_a_configmap_loads_with_a_warning_naming_the_alternatives() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let scratch = Scratch::new("large");
    let good = std::fs::read(guest_wasm("raw_behaviours")).expect("read guest");
    let mib = 1024 * 1024;
    let fits = scratch.file("fits.wasm", &padded(&good, mib - good.len() - 64));
    let large = scratch.file("large.wasm", &padded(&good, mib));
    runtime().load(&fits).await.expect("a guest of 1 MiB loads");
    let log = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    assert!(!log.contains("too large"), "1 MiB fits: {log}");

    runtime()
        .load(&large)
        .await
        .expect("a large guest loads too");
    let log = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    let warning = log
        .lines()
        .find(|line| line.contains("too large for a ConfigMap"))
        .unwrap_or_else(|| panic!("no warning in:\n{log}"));
    for needed in [
        "WARN",
        &large.display().to_string(),
        "image volume",
        "PersistentVolumeClaim",
    ] {
        assert!(warning.contains(needed), "{needed} missing: {warning}");
    }
}

/// One rescan, made current; what it found.
async fn scan(library: &mut Library) -> (Vec<String>, Vec<String>, Vec<String>) {
    let rescan = library.rescan(runtime()).await;
    let names = |guests: Vec<&Guest>| guests.iter().map(|g| g.name().to_owned()).collect();
    let found = (
        names(rescan.candidates.iter().map(|c| &c.guest).collect()),
        names(rescan.removed.iter().collect()),
        rescan.refused.iter().map(|r| r.error.clone()).collect(),
    );
    library.apply(rescan);
    found
}

#[tokio::test]
async fn rescans_take_files_that_hold_still_refuse_once_and_keep_an_emptied_folder() {
    let dir = Scratch::new("library");
    let good = std::fs::read(guest_wasm("raw_behaviours")).expect("the guest");
    dir.file("a.wasm", &good);
    let (mut library, errors) = Library::load(runtime(), std::slice::from_ref(&dir.0)).await;
    assert!(errors.is_empty(), "{errors:?}");
    let none = (Vec::new(), Vec::new(), Vec::new());
    assert_eq!(scan(&mut library).await, none, "nothing changed");

    // A new file is taken at the second scan that sees it unchanged.
    dir.file("b.wasm", &good);
    assert_eq!(scan(&mut library).await, none, "not settled yet");
    assert_eq!(scan(&mut library).await.0, ["b"]);
    let guests: Vec<String> = library
        .guests()
        .iter()
        .map(|g| g.name().to_owned())
        .collect();
    assert_eq!(guests, ["a", "b"]);

    // A broken version is refused once; the version before it keeps serving.
    dir.file("a.wasm", b"\0asm\x0d\0\x01\0 broken");
    assert_eq!(scan(&mut library).await, none, "not settled yet");
    let (_, _, refused) = scan(&mut library).await;
    assert!(
        refused.len() == 1 && refused[0].contains("a.wasm"),
        "{refused:?}"
    );
    assert_eq!(scan(&mut library).await, none, "reported once");
    assert_eq!(library.guests().len(), 2);
    assert!(library.refusals().keys().any(|f| f.ends_with("a.wasm")));

    // A removed file removes its guest, unless no guest would be left.
    std::fs::remove_file(dir.0.join("b.wasm")).expect("removed");
    assert_eq!(scan(&mut library).await.1, ["b"]);
    std::fs::remove_file(dir.0.join("a.wasm")).expect("removed");
    let (_, removed, refused) = scan(&mut library).await;
    assert!(removed.is_empty(), "{removed:?}");
    assert!(refused[0].contains("no other guest is left"), "{refused:?}");
    assert_eq!(library.guests().len(), 1, "the last guest keeps serving");
}

/// A runtime whose guests a helper process compiles: `sh -c script` (`$1`: `file`).
fn compiling_with(script: &str, file: &Path) -> Runtime {
    let command = CompileCommand::new(
        "sh",
        [
            OsStr::new("-c"),
            OsStr::new(script),
            OsStr::new("helper"),
            file.as_os_str(),
        ],
    );
    Runtime::with_cache(crate::limits::Limits::default(), None, Some(command)).expect("runtime")
}

/// Guests compiled by a helper process serve as if compiled here; a helper that fails,
/// cannot be run or answers what the engine refuses is replaced by compiling here; a
/// component the helper finds invalid is refused with its reason.
#[tokio::test]
async fn a_helper_process_compiles_guests_and_a_failing_helper_is_done_without() {
    let scratch = Scratch::new("helper");
    let wasm = guest_wasm("raw_behaviours");
    let compiled = compile_guest(&std::fs::read(&wasm).expect("the guest")).expect("compiled");
    let artifact = scratch.file("artifact", &compiled);
    // The helper reads its input before it answers, as `kapsel compile-guest` does.
    let helper = compiling_with(r#"cat >/dev/null; cat "$1""#, &artifact);
    let guest = helper.load(&wasm).await.expect("loaded");
    assert!(
        matches!(guest.compilation(), guest::Compilation::CompiledApart(_)),
        "{:?}",
        guest.compilation()
    );
    let reply = guest.invoke(cause("ok", BODY), ctx("ok")).await;
    assert!(reply.is_ok(), "{reply:?}");

    for (script, what) in [
        (
            "cat >/dev/null; echo broken >&2; exit 1",
            "a failing helper",
        ),
        ("cat", "a helper answering what the engine refuses"),
        (
            "cat >/dev/null; exec /nonexistent/helper",
            "a helper that cannot run",
        ),
    ] {
        let runtime = compiling_with(script, &artifact);
        let guest = runtime
            .load(&wasm)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            matches!(guest.compilation(), guest::Compilation::Compiled(_)),
            "{what}: {:?}",
            guest.compilation()
        );
    }

    let refusing = compiling_with(
        r#"cat >/dev/null; echo "no such thing" >&2; exit 2"#,
        &artifact,
    );
    let error = refusing.load(&wasm).await.expect_err("invalid");
    assert!(matches!(error, LoadError::Invalid { .. }), "{error:?}");
    assert!(error.to_string().contains("no such thing"), "{error}");
}
