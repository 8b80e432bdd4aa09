//! Reports cross into Python as Python objects (dicts, lists, numbers,
//! strings), never as JSON text for every caller to decode: the crates
//! describe a report as a `serde_json::Value` (its keys are the report's
//! schema, documented where the report is built) and [`to_py`] converts it,
//! here and nowhere else; a report that is a serialised struct goes through
//! [`to_py_ordered`], which keeps its field order.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::IntoPyObjectExt;
use serde_json::Value;

use crate::error::{py_err, CoreError};

/// `v` as the Python object `json.loads` would give for its text.
pub fn to_py(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_py_any(py)?,
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_py_any(py)?,
            (None, Some(u)) => u.into_py_any(py)?,
            _ => n.as_f64().unwrap_or(f64::NAN).into_py_any(py)?,
        },
        Value::String(s) => s.into_py_any(py)?,
        Value::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(to_py(py, x)?)?;
            }
            l.into_any().unbind()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}

/// `v` as the Python object `json.loads(serde_json::to_string(v))` would
/// give, objects keeping the order their fields serialise in: a report that
/// is a serialised struct (the simulator's) prints its keys in the struct's
/// order (`flashgnn simulate --json`), which a `Value` would sort.
pub fn to_py_ordered<T: serde::Serialize>(py: Python<'_>, v: &T) -> PyResult<Py<PyAny>> {
    use serde::de::DeserializeSeed;
    let internal = |e: serde_json::Error| py_err(CoreError::Internal(e.to_string()));
    let text = serde_json::to_string(v).map_err(internal)?;
    let mut de = serde_json::Deserializer::from_str(&text);
    let out = Seed(py).deserialize(&mut de).map_err(internal)?;
    de.end().map_err(internal)?;
    Ok(out)
}

/// Builds the Python object of one JSON value as it is read.
#[derive(Clone, Copy)]
struct Seed<'py>(Python<'py>);

impl<'de> serde::de::DeserializeSeed<'de> for Seed<'_> {
    type Value = Py<PyAny>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Seed<'_> {
    type Value = Py<PyAny>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Self::Value, E> {
        b.into_py_any(self.0).map_err(E::custom)
    }
    fn visit_i64<E: serde::de::Error>(self, i: i64) -> Result<Self::Value, E> {
        i.into_py_any(self.0).map_err(E::custom)
    }
    fn visit_u64<E: serde::de::Error>(self, u: u64) -> Result<Self::Value, E> {
        u.into_py_any(self.0).map_err(E::custom)
    }
    fn visit_f64<E: serde::de::Error>(self, x: f64) -> Result<Self::Value, E> {
        x.into_py_any(self.0).map_err(E::custom)
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
        s.into_py_any(self.0).map_err(E::custom)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.0.None())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let l = PyList::empty(self.0);
        while let Some(x) = a.next_element_seed(self)? {
            l.append(x).map_err(serde::de::Error::custom)?;
        }
        Ok(l.into_any().unbind())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let d = PyDict::new(self.0);
        while let Some(k) = a.next_key::<String>()? {
            let x = a.next_value_seed(self)?;
            d.set_item(k, x).map_err(serde::de::Error::custom)?;
        }
        Ok(d.into_any().unbind())
    }
}
