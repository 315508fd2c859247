//! Logging setup for the `kapsel` binary: verbosity and Kopf's formats (KOPF.md §6.6).
//!
//! - `full`: `[2026-11-30 07:30:00,123] kapsel.operator.process [INFO    ] [default/web-0] Handler 'x' succeeded.`
//! - `plain`: `[default/web-0] Handler 'x' succeeded.`
//! - `json`: `{"timestamp": …, "severity": "info", "logger": …, "message": …,
//!   "object": {"namespace": "default", "name": "web-0"}, …}`
//!
//! A line about an object carries it as the field `object` (`namespace/name`): the text
//! formats print Kopf's `[namespace/name] ` prefix (unless `--no-log-prefix`), JSON puts
//! the reference under `object` (`--log-refkey` names another key; `--log-prefix` adds the
//! prefix to its message too). A guest's line names its guest as the logger and its handler id before the
//! message (text) or as the field `handler` (JSON).

use std::fmt;

use crate::args::{LogFormat, Logging};
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The tracing target of guest lines (the host library's `GUEST_LOG_TARGET`).
const GUEST_TARGET: &str = "kapsel::guest";

/// The target of the command's own messages (its final error), kept when only the
/// command's report is wanted.
pub(crate) const COMMAND_TARGET: &str = "kapsel::command";

/// Installs the global subscriber; `RUST_LOG` overrides the verbosity flags.
pub(crate) fn init(logging: &Logging) {
    // Libraries stay quiet unless asked: their debug output drowns the operator's.
    // `--debug` un-mutes them too (as Kopf's un-mutes asyncio); `--verbose` does not.
    let (own, libraries) = if logging.quiet {
        ("warn", "warn")
    } else if logging.debug {
        ("debug", "debug")
    } else if logging.verbose {
        ("debug", "warn")
    } else {
        ("info", "warn")
    };
    let default = if logging.report_only {
        // The command's own messages and nothing else. (Directives match target
        // prefixes: `kapsel` alone would let `kapsel_host` through.)
        format!("off,{COMMAND_TARGET}={own}")
    } else {
        format!(
            "{libraries},kapsel={own},kapsel_host={own},kapsel_cli={own},kapsel_apiserver={own}"
        )
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .event_format(Format::of(logging))
        .init();
}

/// Renders events in one of Kopf's formats.
struct Format {
    format: LogFormat,
    /// Lines about an object start with `[namespace/name] `.
    prefixed: bool,
    /// The JSON key of the object reference.
    refkey: String,
}

impl Format {
    fn of(logging: &Logging) -> Format {
        Format {
            format: logging.log_format,
            prefixed: logging.prefixed(),
            refkey: logging
                .log_refkey
                .clone()
                .unwrap_or_else(|| "object".to_owned()),
        }
    }
}

impl<S, N> FormatEvent<S, N> for Format
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let line = Line::new(*meta.level(), meta.target(), fields);
        let text = match self.format {
            LogFormat::Plain => line.plain(self.prefixed),
            LogFormat::Full => line.full(self.prefixed, &chrono::Local::now()),
            LogFormat::Json => line.json(self.prefixed, &self.refkey, &chrono::Utc::now()),
        };
        writeln!(writer, "{text}")
    }
}

/// An event's fields: the message, the object reference, and the rest in order.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    object: Option<String>,
    rest: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::String(text)) => self.message = text,
            // The runtime writes `-` for calls about no object.
            ("object", Value::String(text)) => self.object = Some(text).filter(|o| o != "-"),
            (name, value) => {
                self.rest.insert(name.to_owned(), value);
            }
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
}

/// One event, ready to render.
#[derive(Debug)]
struct Line {
    level: Level,
    /// Kopf's logger name: the guest for guest lines, else the target in dots.
    logger: String,
    /// A guest line's handler id.
    handler: Option<String>,
    fields: Fields,
}

impl Line {
    fn new(level: Level, target: &str, mut fields: Fields) -> Line {
        let (logger, handler) = if target == GUEST_TARGET {
            let text = |v: Value| match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            let guest = fields.rest.remove("guest").map(text);
            let handler = fields.rest.remove("handler").map(text);
            (guest.unwrap_or_else(|| "guest".to_owned()), handler)
        } else {
            // The host library's and the command's modules log as `kapsel.<module>`.
            let logger = ["kapsel_host", "kapsel_cli"]
                .iter()
                .find_map(|prefix| target.strip_prefix(prefix))
                .map_or_else(|| target.to_owned(), |rest| format!("kapsel{rest}"));
            (logger.replace("::", "."), None)
        };
        Line {
            level,
            logger,
            handler,
            fields,
        }
    }

    /// `[namespace/name] message`, or the message alone.
    fn message(&self, prefixed: bool) -> String {
        match &self.fields.object {
            Some(object) if prefixed => format!("[{object}] {}", self.fields.message),
            _ => self.fields.message.clone(),
        }
    }

    /// `[namespace/name] handler: message key=value`.
    fn plain(&self, prefixed: bool) -> String {
        let mut text = String::new();
        if let (Some(object), true) = (&self.fields.object, prefixed) {
            text.push_str(&format!("[{object}] "));
        }
        if let Some(handler) = &self.handler {
            text.push_str(&format!("{handler}: "));
        }
        text.push_str(&self.fields.message);
        for (key, value) in &self.fields.rest {
            match value {
                Value::String(s) => text.push_str(&format!(" {key}={s}")),
                other => text.push_str(&format!(" {key}={other}")),
            }
        }
        text
    }

    /// Kopf's `[%(asctime)s] %(name)-20.20s [%(levelname)-8.8s] %(message)s`, except that
    /// long logger names are not cut.
    fn full(&self, prefixed: bool, now: &chrono::DateTime<chrono::Local>) -> String {
        let level = match self.level {
            Level::ERROR => "ERROR",
            Level::WARN => "WARNING",
            Level::INFO => "INFO",
            Level::DEBUG => "DEBUG",
            Level::TRACE => "TRACE",
        };
        format!(
            "[{}] {:<20} [{level:<8}] {}",
            now.format("%Y-%m-%d %H:%M:%S,%3f"),
            self.logger,
            self.plain(prefixed)
        )
    }

    /// Kopf's JSON keys (`timestamp`, `severity`, `message`, `object` or the refkey),
    /// then the logger, the handler and any other field.
    fn json(&self, prefixed: bool, refkey: &str, now: &chrono::DateTime<chrono::Utc>) -> String {
        let severity = match self.level {
            Level::ERROR => "error",
            Level::WARN => "warn",
            Level::INFO => "info",
            Level::DEBUG | Level::TRACE => "debug",
        };
        let mut map = Map::new();
        map.insert(
            "timestamp".into(),
            now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false)
                .into(),
        );
        map.insert("severity".into(), severity.into());
        map.insert("logger".into(), self.logger.clone().into());
        map.insert("message".into(), self.message(prefixed).into());
        if let Some(object) = &self.fields.object {
            map.insert(refkey.to_owned(), object_reference(object));
        }
        if let Some(handler) = &self.handler {
            map.insert("handler".into(), handler.clone().into());
        }
        for (key, value) in &self.fields.rest {
            map.entry(key.clone()).or_insert_with(|| value.clone());
        }
        Value::Object(map).to_string()
    }
}

/// `namespace/name` (or `name`) as Kopf's object reference in JSON.
fn object_reference(object: &str) -> Value {
    match object.split_once('/') {
        Some((namespace, name)) => serde_json::json!({"name": name, "namespace": namespace}),
        None => serde_json::json!({"name": object}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    /// A writer that keeps what the subscriber wrote.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    /// What `log` writes with these logging flags, as text lines.
    fn render(flags: &[&str], log: impl FnOnce()) -> Vec<String> {
        let args = ["kapsel"].iter().chain(flags).chain(&["inspect", "x.wasm"]);
        let cli = crate::args::Cli::try_from_args(args).expect("parsed");
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_max_level(Level::DEBUG)
            .event_format(Format::of(&cli.logging))
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn host_and_guest_lines() {
        tracing::info!(object = %"default/web-0", "Handler '{}' succeeded.", "x");
        tracing::warn!(target: "kapsel::guest", guest = "seed", handler = "log_event",
            object = "default/web-0", "event ADDED for web-0");
        tracing::info!(target: "kapsel::guest", guest = "seed", handler = "probe",
            object = "-", "about nothing");
        tracing::debug!(error = "boom", attempt = 2, "No object here.");
    }

    #[test]
    fn plain_lines_prefix_the_object_and_name_the_handler() {
        assert_eq!(
            render(&["--log-format=plain"], host_and_guest_lines),
            [
                "[default/web-0] Handler 'x' succeeded.",
                "[default/web-0] log_event: event ADDED for web-0",
                "probe: about nothing",
                "No object here. error=boom attempt=2",
            ]
        );
    }

    #[test]
    fn full_lines_have_kopfs_columns() {
        let lines = render(&[], host_and_guest_lines);
        // `[YYYY-MM-DD HH:MM:SS,mmm] ` is 26 characters.
        let (time, rest) = lines[0].split_at(26);
        assert!(
            time.starts_with('[') && time.ends_with("] ") && time.contains(','),
            "{time}"
        );
        assert_eq!(
            rest,
            "kapsel.telemetry.tests [INFO    ] [default/web-0] Handler 'x' succeeded."
        );
        assert_eq!(
            &lines[1][26..],
            "seed                 [WARNING ] [default/web-0] log_event: event ADDED for web-0"
        );
    }

    #[test]
    fn json_lines_carry_the_object_reference_and_the_handler() {
        let lines: Vec<Value> = render(&["--log-format=json"], host_and_guest_lines)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["severity"], "info");
        assert_eq!(lines[0]["message"], "Handler 'x' succeeded.");
        assert_eq!(
            lines[0]["object"],
            serde_json::json!({"namespace": "default", "name": "web-0"})
        );
        assert!(lines[0]["timestamp"].as_str().unwrap().ends_with("+00:00"));
        assert_eq!(lines[1]["severity"], "warn");
        assert_eq!(lines[1]["logger"], "seed");
        assert_eq!(lines[1]["handler"], "log_event");
        assert_eq!(lines[1]["message"], "event ADDED for web-0");
        assert!(lines[2].get("object").is_none(), "`-` is no object");
        assert_eq!(lines[3]["severity"], "debug");
        assert_eq!(lines[3]["attempt"], 2);
        assert_eq!(lines[3]["error"], "boom");
    }

    /// Kopf's `--log-prefix/--no-log-prefix` and `--log-refkey`.
    #[test]
    fn the_object_prefix_and_the_json_key_can_be_changed() {
        let plain = render(
            &["--log-format=plain", "--no-log-prefix"],
            host_and_guest_lines,
        );
        assert_eq!(plain[0], "Handler 'x' succeeded.");
        assert_eq!(plain[1], "log_event: event ADDED for web-0");
        let json = |flags: &[&str]| -> Vec<Value> {
            render(flags, host_and_guest_lines)
                .iter()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let lines = json(&["--log-format=json", "--log-prefix", "--log-refkey=k8s"]);
        assert_eq!(
            lines[0]["message"],
            "[default/web-0] Handler 'x' succeeded."
        );
        assert_eq!(lines[0]["k8s"]["name"], "web-0");
        assert!(lines[0].get("object").is_none(), "{}", lines[0]);
        assert_eq!(lines[2]["message"], "about nothing", "no object, no prefix");
        // The last of the two flags wins, as click's paired flags do.
        let lines = json(&["--log-format=json", "--log-prefix", "--no-log-prefix"]);
        assert_eq!(lines[0]["message"], "Handler 'x' succeeded.");
    }

    #[test]
    fn cluster_scoped_objects_have_only_a_name() {
        assert_eq!(
            object_reference("node-1"),
            serde_json::json!({"name": "node-1"})
        );
    }
}
