//! Tests of the pure Kopf core as a whole: a captured sequence of Kopf's own
//! (`scenario`) and properties over arbitrary objects and handlers (`properties`).

mod properties;
mod scenario;

pub(super) use scenario::merge;
