//! `.npy` files to and from [`Value`]s, for all eleven dtypes, with
//! `ndarray-npy`. The dtype is taken from the file's header: the file is
//! read once into memory and parsed as each element type in turn until the
//! descriptor matches (a mismatch is detected from the header, before the
//! data is decoded).

use std::path::Path;

use ndarray::ArrayD;
use ndarray_npy::{ReadNpyError, ReadNpyExt, WriteNpyExt};

use super::{CliError, CliResult};
use crate::graph::Value;

/// Reads a `.npy` file of any of kiln's dtypes (bool, u8, i8, u16, i16, u32, i32, u64, i64, f32, f64).
pub fn read(path: &Path) -> CliResult<Value> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::usage(format!("cannot read '{}': {e}", path.display())))?;
    read_bytes(&bytes).map_err(|m| CliError::usage(format!("'{}': {m}", path.display())))
}

/// Parses the bytes of a `.npy` file; the error is a message without the path.
pub fn read_bytes(bytes: &[u8]) -> Result<Value, String> {
    fn attempt<T>(bytes: &[u8]) -> Result<Option<Value>, String>
    where
        ArrayD<T>: ReadNpyExt,
        Value: From<ArrayD<T>>,
    {
        match ArrayD::<T>::read_npy(bytes) {
            Ok(a) => Ok(Some(Value::from(a))),
            Err(ReadNpyError::WrongDescriptor(_)) => Ok(None),
            Err(e) => Err(format!("not a valid .npy file: {e}")),
        }
    }
    macro_rules! try_types {
        ($($t:ty),*) => {
            $(if let Some(v) = attempt::<$t>(bytes)? {
                return Ok(v);
            })*
        };
    }
    try_types!(f64, f32, i64, u64, i32, u32, i16, u16, i8, u8, bool);
    Err(format!(
        "unsupported dtype {} (kiln reads bool, u8, i8, u16, i16, u32, i32, u64, i64, f32, f64)",
        descriptor(bytes).unwrap_or_else(|| "in the header".into())
    ))
}

/// The `descr` field of a `.npy` header, for error messages.
fn descriptor(bytes: &[u8]) -> Option<String> {
    let header = String::from_utf8_lossy(bytes.get(..bytes.len().min(4096))?);
    let at = header.find("'descr'")?;
    let rest = &header[at + 7..];
    let start = rest.find(['\'', '"'])? + 1;
    let end = rest[start..].find(['\'', '"'])? + start;
    Some(format!("'{}'", &rest[start..end]))
}

/// Writes a value as a `.npy` file of the same dtype.
pub fn write(path: &Path, v: &Value) -> CliResult {
    let file = std::fs::File::create(path)
        .map_err(|e| CliError::usage(format!("cannot create '{}': {e}", path.display())))?;
    let w = std::io::BufWriter::new(file);
    let r = crate::with_value!(v, a => a.write_npy(w));
    r.map_err(|e| CliError::usage(format!("cannot write '{}': {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    fn roundtrip(v: Value) {
        let mut buf = Vec::new();
        crate::with_value!(&v, a => a.write_npy(&mut buf)).unwrap();
        let back = read_bytes(&buf).unwrap();
        assert_eq!(back.dtype(), v.dtype());
        assert!(back.same_as(&v));
    }

    #[test]
    fn every_dtype_round_trips() {
        let sh = IxDyn(&[2, 3]);
        roundtrip(Value::from(ArrayD::from_shape_fn(sh.clone(), |i| {
            i[1] % 2 == 0
        })));
        roundtrip(Value::from(ArrayD::from_elem(sh.clone(), 7u8)));
        roundtrip(Value::from(ArrayD::from_elem(sh.clone(), -7i8)));
        roundtrip(Value::from(ArrayD::from_elem(sh.clone(), -700i16)));
        roundtrip(Value::from(ArrayD::from_elem(sh.clone(), -70000i32)));
        roundtrip(Value::from(ArrayD::from_elem(sh.clone(), -7i64 << 40)));
        roundtrip(Value::from(ArrayD::from_elem(sh.clone(), 0.25f32)));
        roundtrip(Value::from(ArrayD::from_elem(IxDyn(&[]), 0.5f64)));
    }

    #[test]
    fn bad_files() {
        assert!(read_bytes(b"hello")
            .unwrap_err()
            .contains("not a valid .npy"));
        let mut buf = Vec::new();
        ArrayD::from_elem(IxDyn(&[2]), 1u16)
            .write_npy(&mut buf)
            .unwrap();
        assert_eq!(read_bytes(&buf).unwrap().dtype(), crate::graph::DType::U16);
        // The same header as half precision, which kiln does not read.
        let at = buf.windows(3).position(|w| w == b"<u2").unwrap();
        buf[at..at + 3].copy_from_slice(b"<f2");
        let e = read_bytes(&buf).unwrap_err();
        assert!(e.contains("unsupported dtype '<f2'"), "{e}");
    }
}
