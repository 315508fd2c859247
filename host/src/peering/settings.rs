//! How an operator takes part in peering: its mode and Kopf's `settings.peering.*`.

/// How an operator takes part in peering (KOPF.md §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `--standalone`: no peering at all.
    Standalone,
    /// No flag: peer through the object if its resource and the object exist;
    /// run unpaused otherwise.
    Auto,
    /// `--peering NAME`: paused until the object exists and nobody blocks us.
    Mandatory,
}

/// Peering settings, with Kopf's defaults (`settings.peering.*`).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    /// The peering object's name.
    pub(crate) name: String,
    pub(crate) priority: i64,
    /// Seconds our record stays valid without a keep-alive.
    pub(crate) lifetime: i64,
    /// Our identity among the peers; detected when not given.
    pub(crate) identity: Option<String>,
    /// No debug line for a keep-alive that went well (Kopf's `peering.stealth`).
    pub(crate) stealth: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::Auto,
            name: "default".to_owned(),
            priority: 0,
            lifetime: 60,
            identity: None,
            stealth: false,
        }
    }
}

/// The priority `--dev` gives.
pub(crate) const DEV_PRIORITY: i64 = 666;
