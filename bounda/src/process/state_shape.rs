//! A process state read at the version it was stored at: as its shape, and the fields that shape
//! does not read.

use crate::Error;

/// A process state stored at `version`, read as `T` (today's state or an older shape), or the
/// error naming the field that did not read.
pub fn read_state_shape<T: serde::de::DeserializeOwned>(
    process: &str,
    version: u32,
    state: &serde_json::Value,
) -> Result<T, Error> {
    serde_path_to_error::deserialize(state).map_err(|error| Error::UnreadableState {
        process: process.to_owned(),
        path: error.path().to_string(),
        version,
        source: error.into_inner(),
    })
}

/// The fields of `state` that `T` does not read (`shipping.adress`); empty when `state` does
/// not read as `T` at all.
pub fn dropped_fields<T: serde::de::DeserializeOwned>(state: &serde_json::Value) -> Vec<String> {
    let mut dropped = Vec::new();
    let read: Result<T, _> = serde_ignored::deserialize(state, |path| {
        // A field stored empty (`null`) loses nothing when it is dropped.
        let stored = pointer(&path).and_then(|pointer| state.pointer(&pointer));
        if !stored.is_some_and(serde_json::Value::is_null) {
            dropped.push(path.to_string());
        }
    });
    if read.is_err() {
        return Vec::new();
    }
    dropped
}

/// The JSON pointer of an ignored field's path, when it names one.
fn pointer(path: &serde_ignored::Path<'_>) -> Option<String> {
    use serde_ignored::Path;
    match path {
        Path::Root => Some(String::new()),
        Path::Seq { parent, index } => Some(format!("{}/{index}", pointer(parent)?)),
        Path::Map { parent, key } => {
            let key = key.replace('~', "~0").replace('/', "~1");
            Some(format!("{}/{key}", pointer(parent)?))
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => pointer(parent),
    }
}
