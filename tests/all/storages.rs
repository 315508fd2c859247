//! Kopf's persistence settings through the real path (KOPF.md §4.1, §4.5): the status
//! storages, both storages at once, a custom prefix and finalizer; and migration both
//! ways with objects Kopf 1.45 itself handled (tests/fixtures/kopf/, recorded by
//! scripts/record-kopf-fixtures with the Kopf twin of the `changes` guest's `basic` and
//! `flaky` handlers). Kopf left each object mid-way (create_fn and field_fn done, flaky
//! failed once) and then finished it; Kapsel, with the same settings, continues the
//! mid-way object without re-running the finished handlers and leaves what Kopf left,
//! and on a fresh object writes what Kopf writes, where Kopf reads it.

use kapsel_host::{
    AnnotationsDiffBase, AnnotationsProgress, DiffBaseStorage, Operator, Persistence,
    ProgressStorage, Settings, StatusDiffBase, StatusProgress,
};
use kapsel_tests::*;
use serde_json::{Map, Value, json};

const PREFIX: &str = "kapsel.example.com";
const FIELD_FN: &str = "field_fn/spec.field";

/// Who gives the operator its persistence settings.
#[derive(Debug, Clone, Copy)]
enum Given {
    /// The embedding API (`Operator::settings`).
    Embedder,
    /// A startup handler (the `settings` guest's, from the memo), as in Kopf.
    StartupHandler,
}

impl Given {
    /// The `changes` guest's operator, keeping its state as `layout` says.
    fn operator(self, layout: Layout) -> Operator {
        match self {
            Given::Embedder => {
                let mut settings = Settings::default();
                settings.persistence = layout.persistence();
                changes_operator().settings(settings)
            }
            Given::StartupHandler => {
                let persistence = serde_json::to_value(layout.persistence()).expect("JSON");
                Operator::new([guest("changes"), guest("settings")])
                    .limits(changes_operator_limits())
                    .memo(json!({"settings": {
                        "persistence": persistence,
                        // The guest's own selector would leave the object out.
                        "watching": {"label_selectors": null},
                    }}))
            }
        }
    }
}

/// The layouts of tests/fixtures/kopf/operator.py.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// `StatusProgressStorage`, `StatusDiffBaseStorage`.
    Status,
    /// Multi storages of the annotations and the status.
    Both,
    /// `SmartProgressStorage(prefix=PREFIX)`, `AnnotationsDiffBaseStorage(prefix=PREFIX)`,
    /// the finalizer `PREFIX/finalizer`.
    Prefix,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Status => "status",
            Layout::Both => "both",
            Layout::Prefix => "prefix",
        }
    }

    /// The same settings as Kopf's, as an embedder sets them.
    fn persistence(self) -> Persistence {
        let status_progress = ProgressStorage::Status(StatusProgress::default());
        let status_diffbase = DiffBaseStorage::Status(StatusDiffBase::default());
        match self {
            Layout::Status => Persistence {
                progress_storage: status_progress,
                diffbase_storage: status_diffbase,
                ..Persistence::default()
            },
            Layout::Both => Persistence {
                progress_storage: ProgressStorage::Multi(vec![
                    ProgressStorage::Annotations(AnnotationsProgress::default()),
                    status_progress,
                ]),
                diffbase_storage: DiffBaseStorage::Multi(vec![
                    DiffBaseStorage::Annotations(AnnotationsDiffBase::default()),
                    status_diffbase,
                ]),
                ..Persistence::default()
            },
            Layout::Prefix => Persistence {
                finalizer: format!("{PREFIX}/finalizer"),
                progress_storage: ProgressStorage::Smart {
                    annotations: AnnotationsProgress {
                        prefix: PREFIX.into(),
                        ..AnnotationsProgress::default()
                    },
                    status: StatusProgress::default(),
                },
                diffbase_storage: DiffBaseStorage::Annotations(AnnotationsDiffBase {
                    prefix: PREFIX.into(),
                    ..AnnotationsDiffBase::default()
                }),
                ..Persistence::default()
            },
        }
    }

    fn finalizer(self) -> String {
        self.persistence().finalizer
    }

    /// What Kopf left on the object: `midway` or `done`.
    fn fixture(self, stage: &str) -> Value {
        let path = workspace()
            .join("tests/fixtures/kopf")
            .join(format!("{}-{stage}.json", self.name()));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// The fixture's object as a client would create it (the server's fields dropped).
fn creatable(fixture: &Value) -> Value {
    let meta = &fixture["metadata"];
    let mut metadata = Map::new();
    for key in ["name", "labels", "annotations", "finalizers"] {
        if let Some(value) = meta.get(key).filter(|v| !v.is_null()) {
            metadata.insert(key.into(), value.clone());
        }
    }
    json!({"apiVersion": fixture["apiVersion"], "kind": fixture["kind"],
           "metadata": metadata, "spec": fixture["spec"]})
}

/// A fresh object as the recording created it.
fn fresh() -> Value {
    kopfexample(
        "obj",
        &["basic", "flaky"],
        json!({}),
        json!({}),
        json!({"field": "value"}),
    )
}

/// Where Kopf keeps its state on the object: the annotations of the storages' prefixes,
/// `status.kopf` and the finalizers; empty mappings dropped (the API server keeps a
/// mapping whose members were all removed, `status.kopf.progress: {}`).
fn persisted(body: &Value) -> Value {
    let annotations: Map<String, Value> = annotations(body)
        .into_iter()
        .filter(|(key, _)| key.starts_with("kopf.zalando.org/") || key.starts_with(PREFIX))
        .map(|(key, value)| (key, Value::String(value)))
        .collect();
    let mut kopf = body["status"]["kopf"].clone();
    if let Value::Object(fields) = &mut kopf {
        fields.retain(|_, value| value.as_object().is_none_or(|m| !m.is_empty()));
    }
    json!({"annotations": annotations, "status.kopf": kopf, "finalizers": finalizers(body)})
}

/// Every progress record as `(where, handler, record)`, the annotations' parsed.
fn progress_records(body: &Value) -> Vec<(String, String, Value)> {
    let mut found = Vec::new();
    for (key, text) in annotations(body) {
        let Some((prefix, name)) = key.split_once('/') else {
            continue;
        };
        let ours = prefix == "kopf.zalando.org" || prefix == PREFIX;
        if ours && !["last-handled-configuration", "kopf-managed", "touch-dummy"].contains(&name) {
            found.push((format!("{prefix}/"), name.to_owned(), check_record(&text)));
        }
    }
    if let Some(records) = body["status"]["kopf"]["progress"].as_object() {
        for (id, record) in records {
            found.push(("status.kopf.progress".into(), id.clone(), record.clone()));
        }
    }
    found
}

/// A record without its times, which differ from run to run.
fn timeless(record: &Value) -> Value {
    let mut record = record.clone();
    if let Value::Object(fields) = &mut record {
        for time in ["started", "stopped", "delayed"] {
            if let Some(value) = fields.get_mut(time) {
                *value = json!(value.is_string());
            }
        }
    }
    record
}

/// The creation is handled: the diff-base stored, no progress left, flaky's result in.
fn done(layout: Layout) -> impl Fn(&Value) -> bool {
    move |body: &Value| {
        let stored = match layout {
            Layout::Status | Layout::Both => {
                body["status"]["kopf"]["last-handled-configuration"].is_string()
            }
            Layout::Prefix => {
                annotations(body).contains_key(&format!("{PREFIX}/last-handled-configuration"))
            }
        };
        stored && progress_records(body).is_empty() && !body["status"]["flaky"].is_null()
    }
}

/// Kapsel continues what Kopf left mid-way: only flaky runs (from Kopf's retry count), and
/// the object ends as Kopf's own second run left it.
async fn continues_kopfs_object(layout: Layout) {
    let s = Scene::start(&format!("kopf-{}", layout.name())).await;
    let midway = layout.fixture("midway");
    s.create(creatable(&midway)).await;
    s.patch_status("obj", json!({"status": midway["status"]}))
        .await;
    let operator = s.cluster.start_operator(Given::Embedder.operator(layout));
    let body = s
        .tracker
        .wait_for("obj", "the creation handled", done(layout))
        .await;
    let kopf_done = layout.fixture("done");
    assert_eq!(
        persisted(&body),
        persisted(&kopf_done),
        "what Kopf leaves when it finishes the same object"
    );
    assert_eq!(
        body["status"]["create_fn"],
        kopf_done["status"]["create_fn"]
    );
    assert_eq!(body["status"][FIELD_FN], kopf_done["status"][FIELD_FN]);
    assert_eq!(
        body["status"]["flaky"]["retry"],
        json!(2),
        "Kopf's failed attempt counted: retries 1 (fails) and 2 (succeeds) here"
    );
    // While it ran, flaky's record kept Kopf's start time, where Kopf keeps it.
    let kopf_started = progress_records(&midway)
        .into_iter()
        .find(|(_, id, _)| id == "flaky")
        .map(|(_, _, record)| record["started"].clone());
    let started: Vec<Value> = s
        .tracker
        .versions("obj")
        .iter()
        .flat_map(|seen| progress_records(&seen.body))
        .filter(|(_, id, _)| id == "flaky")
        .map(|(_, _, record)| record["started"].clone())
        .collect();
    assert!(
        !started.is_empty() && started.iter().all(|t| Some(t) == kopf_started.as_ref()),
        "{started:?} vs Kopf's {kopf_started:?}"
    );
    s.settled(&operator, &["obj"]).await;
    let records = operator.journal().records();
    assert_calls(
        &records,
        &s.object("obj"),
        &[
            ("create_fn", 0),
            (FIELD_FN, 0),
            ("flaky", 2),
            ("resume_fn", 0),
        ],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn kopfs_status_storages_are_continued() {
    continues_kopfs_object(Layout::Status).await;
}

#[tokio::test]
async fn kopfs_both_storages_are_continued() {
    continues_kopfs_object(Layout::Both).await;
}

#[tokio::test]
async fn kopfs_custom_prefix_and_finalizer_are_continued() {
    continues_kopfs_object(Layout::Prefix).await;
}

/// Kapsel handles a fresh object as Kopf did: the records it writes mid-way are where
/// Kopf keeps them and as Kopf writes them (the same keys, fields and values but the
/// times: Kopf reads them as its own), and the object ends as Kopf left it. Only the
/// storages' places are written: nothing in annotations with the status storage, no
/// status records with the annotations.
async fn writes_what_kopf_reads(layout: Layout, given: Given) {
    let s = Scene::start(&format!("to-kopf-{}", layout.name())).await;
    s.create(fresh()).await;
    let operator = s.cluster.start_operator(given.operator(layout));
    let body = s
        .tracker
        .wait_for("obj", "the creation handled", done(layout))
        .await;
    assert_eq!(persisted(&body), persisted(&layout.fixture("done")));
    // Mid-way, as Kopf was recorded: create_fn and field_fn done, flaky failed once, in
    // every place (the annotations and the status arrive in two patches).
    let kopf_midway = layout.fixture("midway");
    let comparable = |body: &Value| {
        let mut records: Vec<(String, String, Value)> = progress_records(body)
            .into_iter()
            .map(|(place, id, record)| (place, id, timeless(&record)))
            .collect();
        records.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        records
    };
    let midway = s
        .tracker
        .versions("obj")
        .into_iter()
        .map(|seen| seen.body)
        .find(|body| {
            let records = progress_records(body);
            records.len() == progress_records(&kopf_midway).len()
                && records.iter().all(|(_, id, record)| {
                    if id == "flaky" {
                        record["retries"] == json!(1)
                    } else {
                        record["success"] == json!(true)
                    }
                })
        })
        .unwrap_or_else(|| panic!("never mid-way:\n{}", s.tracker.dump("obj")));
    assert_eq!(comparable(&midway), comparable(&kopf_midway));
    let mut keys: Vec<String> = annotations(&midway).into_keys().collect();
    keys.retain(|k| k.starts_with("kopf.zalando.org/") || k.starts_with(PREFIX));
    let mut kopf_keys: Vec<String> = annotations(&kopf_midway).into_keys().collect();
    kopf_keys.retain(|k| k.starts_with("kopf.zalando.org/") || k.starts_with(PREFIX));
    assert_eq!(keys, kopf_keys, "the same annotations, the marker included");
    for seen in s.tracker.versions("obj") {
        let finalizers = finalizers(&seen.body);
        assert!(
            finalizers.is_empty() || finalizers == [layout.finalizer()],
            "only the configured finalizer: {finalizers:?}"
        );
        if matches!(layout, Layout::Status) {
            assert_eq!(kopf_keys.len(), 0);
            assert!(
                annotations(&seen.body).keys().all(|k| !k.contains("kopf")),
                "the status storages write no annotation: {:#}",
                seen.body
            );
        }
    }
    // The finalizer goes once the deletion handlers are done.
    s.delete("obj").await;
    s.tracker.wait_gone("obj").await;
    let records = operator.journal().records();
    assert_calls(
        &records,
        &s.object("obj"),
        &[("create_fn", 1), ("flaky", 3), ("delete_fn", 1)],
    );
    operator.stop().await.expect("stop");
    s.shutdown().await;
}

#[tokio::test]
async fn the_status_storages_write_what_kopf_reads() {
    writes_what_kopf_reads(Layout::Status, Given::Embedder).await;
}

#[tokio::test]
async fn both_storages_write_what_kopf_reads() {
    writes_what_kopf_reads(Layout::Both, Given::Embedder).await;
}

#[tokio::test]
async fn a_custom_prefix_and_finalizer_write_what_kopf_reads() {
    writes_what_kopf_reads(Layout::Prefix, Given::Embedder).await;
}

/// Kopf's way: the storages set by a startup handler (`settings.persistence`), here the
/// `settings` guest's, which merges the operator's memo's `settings`: a storage of
/// another shape replaces the default one whole.
#[tokio::test]
async fn both_storages_set_by_a_startup_handler_write_what_kopf_reads() {
    writes_what_kopf_reads(Layout::Both, Given::StartupHandler).await;
}

#[tokio::test]
async fn a_prefix_and_finalizer_set_by_a_startup_handler_write_what_kopf_reads() {
    writes_what_kopf_reads(Layout::Prefix, Given::StartupHandler).await;
}

/// Settings Kubernetes would refuse on every object stop the operator before it starts.
#[tokio::test]
async fn bad_persistence_settings_stop_the_operator() {
    let persistence = Persistence {
        finalizer: "not a finalizer".into(),
        ..Persistence::default()
    };
    let mut settings = Settings::default();
    settings.persistence = persistence;
    let error = kapsel_host::Operator::new([guest("changes")])
        .settings(settings)
        .run(std::future::pending())
        .await
        .expect_err("refused");
    assert!(
        matches!(error, kapsel_host::Error::Persistence(_)),
        "{error:?}"
    );
    assert!(
        kapsel_host::error_chain(&error).contains("\"not a finalizer\" is not a qualified name"),
        "{}",
        kapsel_host::error_chain(&error)
    );
}
