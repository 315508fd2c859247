//! Compiling a guest into machine code: in this process, or in a helper process.
//!
//! Compiling is Cranelift's work: megabytes of code and of scratch memory that a
//! long-running operator needs only while it loads a guest, but whose pages then stay in
//! its resident set (a quarter of an idle operator's: docs/performance.md). An operator given a
//! [`CompileCommand`] runs it instead — `kapsel compile-guest`, the same binary — hands
//! it the component on stdin and takes wasmtime's compiled artifact from its stdout; the
//! helper exits, and its memory with it.
//!
//! The helper compiles with the engine settings of [`engine_config`], as the operator's
//! engine does, and the operator's engine checks that the artifact was made by a
//! compatible engine before it loads it. A helper that cannot be run, fails, or answers
//! what the engine refuses is warned about and the guest compiled here instead: the
//! helper only saves memory. A component the helper finds invalid (exit code 2, the
//! reason on stderr) is invalid here too.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use wasmtime::component::Component;
use wasmtime::{Config, Engine};

/// The exit code of a helper that found the component invalid.
pub const INVALID_COMPONENT: i32 = 2;

/// A program that compiles guests: given a component's bytes on stdin, it writes what
/// [`compile_guest`] returns for them on stdout and exits with 0; with
/// [`INVALID_COMPONENT`] and the reason on stderr when the component is invalid.
#[derive(Debug, Clone)]
pub struct CompileCommand {
    program: PathBuf,
    args: Vec<OsString>,
}

impl CompileCommand {
    /// `program` with `args`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> CompileCommand {
        CompileCommand {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// Compiles `bytes` in the helper and loads the result into `engine`. Blocks.
    pub(super) fn compile(&self, engine: &Engine, bytes: &[u8]) -> Compiled {
        let artifact = match self.run(bytes) {
            Ok(artifact) => artifact,
            Err(outcome) => return outcome,
        };
        // SAFETY: the bytes come from the helper this operator was configured to trust
        // with compiling (its own binary, as `kapsel run` sets it), through a pipe, and
        // are the bytes in memory now; wasmtime checks that a compatible engine made them.
        #[expect(
            unsafe_code,
            reason = "loading machine code compiled by the operator's own helper"
        )]
        let loaded = unsafe { Component::deserialize(engine, &artifact) };
        match loaded {
            Ok(component) => Compiled::Loaded(component, artifact),
            Err(error) => Compiled::Failed(format!("the engine refused its result: {error:#}")),
        }
    }

    /// Runs the helper on `bytes`: its stdout, or what went wrong.
    fn run(&self, bytes: &[u8]) -> Result<Vec<u8>, Compiled> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| {
                Compiled::Failed(format!("cannot run {}: {error}", self.program.display()))
            })?;
        // The helper reads all of its input before it writes anything, so writing first
        // and reading after cannot deadlock on full pipes.
        let written = child
            .stdin
            .take()
            .map(|mut stdin| stdin.write_all(bytes))
            .transpose();
        let mut artifact = Vec::new();
        let mut errors = String::new();
        let read = child
            .stdout
            .take()
            .map(|mut stdout| stdout.read_to_end(&mut artifact))
            .transpose()
            .and_then(|_| {
                child
                    .stderr
                    .take()
                    .map(|mut stderr| stderr.read_to_string(&mut errors))
                    .transpose()
            });
        let status = child
            .wait()
            .map_err(|error| Compiled::Failed(format!("cannot wait for the helper: {error}")))?;
        let errors = errors.trim().to_owned();
        match status.code() {
            Some(0) => {
                if let Err(error) = written.and(read) {
                    return Err(Compiled::Failed(format!(
                        "cannot talk to the helper: {error}"
                    )));
                }
                Ok(artifact)
            }
            Some(INVALID_COMPONENT) => Err(Compiled::Invalid(errors)),
            _ => Err(Compiled::Failed(format!(
                "the helper ended with {status}: {errors}"
            ))),
        }
    }
}

/// Compiles a component the way an operator's engine would, into bytes an operator
/// given a [`CompileCommand`] loads: what a compiling helper writes on stdout.
///
/// # Errors
/// The component is invalid (its reason), or the engine could not be made.
pub fn compile_guest(component: &[u8]) -> Result<Vec<u8>, CompileError> {
    let engine = Engine::new(&engine_config()).map_err(CompileError::Engine)?;
    engine
        .precompile_component(component)
        .map_err(CompileError::Invalid)
}

/// Why [`compile_guest`] could not compile a component; the text is wasmtime's, with its
/// causes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The engine could not be made with the operator's settings.
    #[error("{0:#}")]
    Engine(#[source] wasmtime::Error),
    /// The component does not validate or compile.
    #[error("{0:#}")]
    Invalid(#[source] wasmtime::Error),
}

/// What compiling in a helper came to.
pub(super) enum Compiled {
    /// The component, and the artifact it was loaded from (for the cache).
    Loaded(Component, Vec<u8>),
    /// The helper found the component invalid: why.
    Invalid(String),
    /// The helper could not do it (why): compile here instead.
    Failed(String),
}

/// The settings that decide what compiled code looks like, shared by the operator's
/// engine (`engine`) and a compiling helper's, so that one loads what the other made.
pub(super) fn engine_config() -> Config {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        // Deadlines are wall-clock (epochs), which costs less per instruction than fuel.
        .consume_fuel(false);
    wasm
}
