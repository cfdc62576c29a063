//! `kiln eval --stream`: out-of-core evaluation. The `.npy` inputs are
//! memory-mapped (never read whole), the compiled function runs chunk by
//! chunk ([`CHUNK`] elements) on views of the mapped data, and an
//! element-wise result is written straight into a memory-mapped output file.
//!
//! What streams (checked on the graph built with the files' true shapes,
//! before anything is mapped; anything else is a clear error naming why):
//! - every input is either *streamed* (all streamed inputs share one shape
//!   `S`) or holds a single element (a 0-d or all-ones-shape array, read into
//!   memory and passed as a 0-d value to every chunk, so it is constant across
//!   chunks);
//! - the expression is element-wise (Elemwise / Composite nodes, constants
//!   of one element, DimShuffles only of one-element values), optionally
//!   under one full `sum` / `prod` / `max` / `min` over all axes.
//!
//! Under these rules the result, in C order, is the element-wise function of
//! the flattened inputs, so the compiled function takes every streamed input
//! as a 1-D array of any length and each chunk is a contiguous range of
//! elements. A full reduction is computed per chunk by the same compiled
//! function and the per-chunk partials are combined: float sums in `f64`
//! (each chunk already reduces pairwise, and the few partials are then summed
//! in `f64`, so the error is no worse than the in-memory path's), float
//! products in `f64`, integer sums and products with the in-memory path's
//! wrapping arithmetic in the result dtype, and max / min NaN-propagating.
//!
//! Files: format 1.0/2.0/3.0 `.npy`, C order, little-endian (or one-byte)
//! dtypes; the data offset must be aligned for the element type (numpy pads
//! headers to 64 bytes, so its files always are). Bool inputs are checked to
//! hold only 0 / 1 bytes, chunk by chunk.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut};
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};
use rustc_hash::FxHashSet;

use super::eval::{parse_input, shape_text, summary};
use super::{build, npy, parse_mode, CliError, CliResult, Declared, EvalArgs};
use crate::function::function;
use crate::graph::{DType, Value};
use crate::linker::{Arg, ArgMut};
use crate::ops::{Op, ReduceOp};
use crate::tensor::{tensor, Origin, Tensor};

/// Elements per chunk unless `--chunk-elements` says otherwise (4 Mi: 32 MiB
/// of `f64` per streamed input).
pub const CHUNK: usize = 4 << 20;

/// The parsed header of a `.npy` file.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    /// The element type.
    pub dtype: DType,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Where the data starts in the file.
    pub data_offset: usize,
}

impl NpyHeader {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn err(path: &Path, msg: impl std::fmt::Display) -> CliError {
    CliError::usage(format!("'{}': {msg}", path.display()))
}

/// Parses the header of a `.npy` file from its first bytes; refuses
/// Fortran order and non-native byte orders.
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, String> {
    let bad = |m: &str| format!("not a valid .npy file: {m}");
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("no \\x93NUMPY magic"));
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(&format!("unknown format version {v}"))),
    };
    let text = bytes
        .get(start..start + len)
        .ok_or_else(|| bad("truncated header"))?;
    let text = std::str::from_utf8(text).map_err(|_| bad("header is not text"))?;
    let field = |key: &str| -> Result<&str, String> {
        let at = text
            .find(&format!("'{key}'"))
            .ok_or_else(|| bad(&format!("no '{key}' in the header")))?;
        let rest = text[at + key.len() + 2..].trim_start();
        Ok(rest.strip_prefix(':').unwrap_or(rest).trim_start())
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| bad("descr is not a string"))?;
    let native = if cfg!(target_endian = "little") {
        '<'
    } else {
        '>'
    };
    let (order, code) = descr.split_at(descr.len().min(1));
    let dtype = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => {
            return Err(format!(
                "unsupported dtype '{descr}' (kiln reads bool, u8, i8, u16, i16, u32, i32, u64, i64, f32, f64)"
            ))
        }
    };
    let one_byte = dtype.size_of() == 1;
    if !(order == "|" || order == "=" || order.starts_with(native) || one_byte && order == "<") {
        return Err(format!(
            "dtype '{descr}' is not in this machine's byte order; --stream maps the data as is \
             (convert it with numpy: a.astype(a.dtype.newbyteorder('='))"
        ));
    }
    if field("fortran_order")?.starts_with("True") {
        return Err(
            "the array is in Fortran order; --stream needs C order (save np.ascontiguousarray(a))"
                .into(),
        );
    }
    let shape = field("shape")?;
    let shape = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| bad("shape is not a tuple"))?;
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad("bad shape entry")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NpyHeader {
        dtype,
        shape,
        data_offset: start + len,
    })
}

/// Reads the header of the `.npy` file at `path`.
fn read_header(path: &Path) -> CliResult<(File, NpyHeader)> {
    let mut file = File::open(path).map_err(|e| err(path, format!("cannot open: {e}")))?;
    let mut head = Vec::new();
    (&mut file)
        .take(1 << 16)
        .read_to_end(&mut head)
        .map_err(|e| err(path, format!("cannot read: {e}")))?;
    let h = parse_header(&head).map_err(|m| err(path, m))?;
    let size = h.len() * h.dtype.size_of();
    let file_len = file
        .metadata()
        .map_err(|e| err(path, format!("cannot stat: {e}")))?
        .len() as usize;
    if file_len < h.data_offset + size {
        return Err(err(
            path,
            format!(
                "the file is truncated: shape {} of {} needs {} data bytes, it has {}",
                shape_text(&h.shape),
                h.dtype,
                size,
                file_len.saturating_sub(h.data_offset)
            ),
        ));
    }
    if h.data_offset % h.dtype.size_of() != 0 {
        return Err(err(
            path,
            format!(
                "the data starts at byte {}, not aligned for {}; --stream maps the data in place \
                 (files written by numpy are aligned)",
                h.data_offset, h.dtype
            ),
        ));
    }
    Ok((file, h))
}

/// One streamed input: its mapped file and header.
struct Mapped {
    name: String,
    path: PathBuf,
    map: Mmap,
    header: NpyHeader,
}

/// What the expression computes per chunk.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// An element-wise result, written chunk by chunk.
    Elementwise,
    /// A full reduction; the per-chunk partials are combined.
    Reduce(ReduceOp),
}

/// Checks that `y` (built with the files' true shapes) streams.
fn classify(y: &Tensor) -> CliResult<(Shape, Tensor)> {
    let (kind, body) = match y.owner_op() {
        Some(Op::CAReduce { op, axes })
            if matches!(
                op,
                ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min
            ) && axes
                .as_ref()
                .is_none_or(|a| a.len() == y.owner_inputs()[0].ndim()) =>
        {
            (Shape::Reduce(*op), y.owner_inputs()[0].clone())
        }
        _ => (Shape::Elementwise, y.clone()),
    };
    let why = "kiln eval --stream runs element-wise expressions and full sum/prod/max/min \
               reductions of them, chunk by chunk";
    let one = |t: &Tensor| t.ty().shape.iter().all(|d| *d == Some(1));
    let mut seen = FxHashSet::default();
    let mut stack = vec![body.clone()];
    while let Some(t) = stack.pop() {
        if !seen.insert(std::sync::Arc::as_ptr(&t.0)) {
            continue;
        }
        match &t.0.origin {
            Origin::Input => {}
            Origin::Constant(v) => {
                if v.len() != 1 {
                    return Err(CliError::usage(format!(
                        "{why}; a constant of shape {} is not element-wise over the chunks",
                        shape_text(v.shape())
                    )));
                }
            }
            Origin::Output { apply, .. } => {
                match &apply.op {
                    Op::Elemwise { .. } | Op::Composite { .. } => {}
                    Op::DimShuffle { .. } if apply.inputs.iter().all(one) => {}
                    Op::DimShuffle { .. } => {
                        return Err(CliError::usage(format!(
                            "{why}; a transpose / dimshuffle of a streamed input reorders elements"
                        )))
                    }
                    Op::CAReduce { .. } => {
                        return Err(CliError::usage(format!(
                            "{why}; this reduction is over some axes only, or is not the \
                             expression's outermost operation"
                        )))
                    }
                    op => return Err(CliError::usage(format!("{why}; {} is neither", op.name()))),
                }
                stack.extend(apply.inputs.iter().cloned());
            }
        }
    }
    Ok((kind, body))
}

/// A per-chunk view of one streamed input (bool inputs are checked and
/// copied into `scratch`).
fn chunk_arg<'a>(
    m: &'a Mapped,
    range: std::ops::Range<usize>,
    scratch: &'a [bool],
) -> CliResult<Arg<'a>> {
    let h = &m.header;
    let bytes = &m.map[h.data_offset..h.data_offset + h.len() * h.dtype.size_of()];
    let shape = IxDyn(&[range.len()]);
    macro_rules! view {
        ($t:ty) => {{
            let all: &[$t] = bytemuck::try_cast_slice(bytes)
                .map_err(|e| err(&m.path, format!("cannot map the data: {e:?}")))?;
            Arg::from(ArrayViewD::from_shape(shape, &all[range]).expect("a 1-D view of a slice"))
        }};
    }
    Ok(match h.dtype {
        DType::Bool => Arg::from(ArrayViewD::from_shape(shape, scratch).expect("1-D")),
        DType::U8 => view!(u8),
        DType::I8 => view!(i8),
        DType::U16 => view!(u16),
        DType::U32 => view!(u32),
        DType::U64 => view!(u64),
        DType::I16 => view!(i16),
        DType::I32 => view!(i32),
        DType::I64 => view!(i64),
        DType::F32 => view!(f32),
        DType::F64 => view!(f64),
    })
}

/// Copies a bool input's chunk into `scratch`, refusing bytes other than 0 / 1.
fn fill_bools(m: &Mapped, range: std::ops::Range<usize>, scratch: &mut Vec<bool>) -> CliResult {
    let start = m.header.data_offset;
    scratch.clear();
    for &b in &m.map[start + range.start..start + range.end] {
        match b {
            0 => scratch.push(false),
            1 => scratch.push(true),
            _ => {
                return Err(err(
                    &m.path,
                    format!("bool data holds the byte {b} (only 0 and 1 are booleans)"),
                ))
            }
        }
    }
    Ok(())
}

/// A `.npy` format 1.0 header for a C-order array, padded to 64 bytes (as
/// numpy writes it; the data follows directly).
pub fn header_bytes(dtype: DType, shape: &[usize]) -> Vec<u8> {
    let code = match dtype {
        DType::Bool => "|b1",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    };
    let shape = match shape {
        [n] => format!("({n},)"),
        _ => shape_text(shape),
    };
    let mut text = format!("{{'descr': '{code}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + text.len() + 1) % 64 != 0 {
        text.push(' ');
    }
    text.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// Combines the per-chunk partials of a full reduction (see the module docs).
fn combine(op: ReduceOp, dtype: DType, partials: &[Value]) -> Value {
    if dtype.is_float() {
        let xs: Vec<f64> = partials
            .iter()
            .map(|p| p.scalar_as_f64().expect("a 0-d partial"))
            .collect();
        let v = match op {
            ReduceOp::Sum => xs.iter().sum(),
            ReduceOp::Prod => xs.iter().product(),
            ReduceOp::Max => xs.iter().fold(f64::NEG_INFINITY, |a, &b| {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }),
            _ => xs.iter().fold(f64::INFINITY, |a, &b| {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.min(b)
                }
            }),
        };
        return Value::scalar_f64(dtype, v);
    }
    let xs: Vec<i64> = partials
        .iter()
        .map(|p| {
            p.to_i64_array()
                .iter()
                .copied()
                .next()
                .expect("a 0-d partial")
        })
        .collect();
    let v = match op {
        ReduceOp::Sum => xs.iter().fold(0i64, |a, &b| a.wrapping_add(b)),
        ReduceOp::Prod => xs.iter().fold(1i64, |a, &b| a.wrapping_mul(b)),
        // `u64` partials compare by their unsigned values.
        ReduceOp::Max if dtype == DType::U64 => xs
            .iter()
            .map(|&x| x as u64)
            .max()
            .expect("at least one chunk") as i64,
        ReduceOp::Min if dtype == DType::U64 => xs
            .iter()
            .map(|&x| x as u64)
            .min()
            .expect("at least one chunk") as i64,
        ReduceOp::Max => xs.iter().copied().max().expect("at least one chunk"),
        _ => xs.iter().copied().min().expect("at least one chunk"),
    };
    // Integer results are reduced in their own dtype (wrapping): narrowing the
    // i64 combination reproduces that.
    Value::scalar_i64(dtype, v)
}

/// Runs `kiln eval --stream`, writing its report to `out`: what was
/// written, or a reduction's value (to `--out` or summarised).
pub fn report(a: &EvalArgs, out: &mut dyn std::io::Write) -> CliResult {
    let (value, note) = run(a)?;
    match value {
        Some(v) => match &a.out {
            Some(path) => {
                npy::write(path, &v)?;
                writeln!(
                    out,
                    "wrote {} scalar to {} ({note})",
                    v.dtype(),
                    path.display()
                )?;
            }
            None => out.write_all(summary(&v).as_bytes())?,
        },
        None => writeln!(out, "{note}")?,
    }
    Ok(())
}

/// Runs `kiln eval --stream`; returns the result when it is not written to `--out`.
pub fn run(a: &EvalArgs) -> CliResult<(Option<Value>, String)> {
    if a.grad.is_some() || a.profile {
        return Err(CliError::usage(
            "--stream cannot be combined with --grad or --profile",
        ));
    }
    let chunk = a.chunk_elements.unwrap_or(CHUNK);
    if chunk == 0 {
        return Err(CliError::usage("--chunk-elements must be at least 1"));
    }
    let mode = parse_mode(&a.mode)?;
    let mut names: Vec<String> = Vec::new();
    let mut streamed: Vec<Mapped> = Vec::new();
    let mut small: Vec<(String, Value)> = Vec::new();
    let mut true_decls = Vec::new();
    for s in &a.inputs {
        let (name, path) = parse_input(s)?;
        if names.contains(&name) {
            return Err(CliError::usage(format!("input '{name}' is given twice")));
        }
        names.push(name.clone());
        let (file, header) = read_header(&path)?;
        let dims: Vec<Option<usize>> = header.shape.iter().map(|&d| Some(d)).collect();
        true_decls.push(Declared {
            name: name.clone(),
            dtype: header.dtype,
            dims: dims.clone(),
            tensor: tensor(&name, header.dtype, &dims),
        });
        if header.len() == 1 {
            let v = npy::read(&path)?;
            let v = crate::map_value!(v, a => a.into_shape_with_order(IxDyn(&[])).expect("one element"));
            small.push((name, v));
        } else {
            if let Some(first) = streamed.first() {
                if first.header.shape != header.shape {
                    return Err(CliError::usage(format!(
                        "--stream needs every input of more than one element to have the same \
                         shape: '{}' has {}, '{}' has {}",
                        first.name,
                        shape_text(&first.header.shape),
                        name,
                        shape_text(&header.shape)
                    )));
                }
            }
            // SAFETY: the file is mapped read-only; kiln does not write it, and
            // (as for any mapped file) another process truncating it meanwhile
            // is outside what kiln can guard against.
            let map =
                unsafe { Mmap::map(&file) }.map_err(|e| err(&path, format!("cannot map: {e}")))?;
            streamed.push(Mapped {
                name,
                path,
                map,
                header,
            });
        }
    }
    let Some(first) = streamed.first() else {
        return Err(CliError::usage(
            "--stream needs at least one input of more than one element to stream",
        ));
    };
    let total = first.header.len();
    let (kind, body) = classify(&build(&a.expr, &true_decls)?)?;
    if body
        .ty()
        .shape
        .iter()
        .map(|d| d.unwrap_or(0))
        .product::<usize>()
        != total
    {
        return Err(CliError::usage(format!(
            "--stream: the element-wise part has shape {}, not the streamed inputs' {}",
            body.ty().shape_str(),
            shape_text(&first.header.shape)
        )));
    }

    // The same expression over flattened chunks: streamed inputs 1-D of any
    // length, one-element inputs 0-d.
    let chunk_decls: Vec<Declared> = true_decls
        .iter()
        .map(|d| {
            let dims = if small.iter().any(|(n, _)| *n == d.name) {
                vec![]
            } else {
                vec![None]
            };
            Declared {
                name: d.name.clone(),
                dtype: d.dtype,
                tensor: tensor(&d.name, d.dtype, &dims),
                dims,
            }
        })
        .collect();
    let y = build(&a.expr, &chunk_decls)?;
    let out_dtype = y.dtype();
    let inputs: Vec<_> = chunk_decls.iter().map(|d| d.tensor.clone()).collect();
    let f = function(&inputs, &[y])
        .mode(mode)
        .message("kiln eval --stream")
        .compile()
        .map_err(|e| CliError::from_kiln(e, &a.expr))?;

    let mut out_map = match (kind, &a.out) {
        (Shape::Elementwise, Some(path)) => {
            let dims: Vec<usize> = body.ty().shape.iter().map(|d| d.unwrap_or(0)).collect();
            let header = header_bytes(out_dtype, &dims);
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .map_err(|e| err(path, format!("cannot create: {e}")))?;
            file.write_all(&header)
                .and_then(|()| file.set_len((header.len() + total * out_dtype.size_of()) as u64))
                .map_err(|e| err(path, format!("cannot write: {e}")))?;
            // SAFETY: kiln just created (truncated) the file and is its only
            // writer; the map lives until the function returns.
            let map = unsafe { MmapMut::map_mut(&file) }
                .map_err(|e| err(path, format!("cannot map: {e}")))?;
            Some((map, header.len(), dims))
        }
        (Shape::Elementwise, None) => {
            return Err(CliError::usage(
                "--stream writes an element-wise result to a file: give --out FILE.npy",
            ))
        }
        (Shape::Reduce(_), _) => None,
    };

    let mut scratch: Vec<Vec<bool>> = vec![Vec::new(); streamed.len()];
    let mut partials = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + chunk).min(total);
        for (m, s) in streamed.iter().zip(&mut scratch) {
            if m.header.dtype == DType::Bool {
                fill_bools(m, start..end, s)?;
            }
        }
        let mut args = Vec::with_capacity(names.len());
        for name in &names {
            if let Some((_, v)) = small.iter().find(|(n, _)| n == name) {
                args.push(Arg::from(v));
            } else {
                let i = streamed
                    .iter()
                    .position(|m| m.name == *name)
                    .expect("every input is small or streamed");
                args.push(chunk_arg(&streamed[i], start..end, &scratch[i])?);
            }
        }
        let fail = |e: crate::Error| CliError::usage(e.to_string());
        match &mut out_map {
            Some((map, offset, _)) => {
                let size = out_dtype.size_of();
                let bytes = &mut map[*offset + start * size..*offset + end * size];
                let shape = IxDyn(&[end - start]);
                macro_rules! into {
                    ($t:ty) => {{
                        let out: &mut [$t] = bytemuck::try_cast_slice_mut(bytes).map_err(|e| {
                            CliError::usage(format!("cannot map the output: {e:?}"))
                        })?;
                        let view = ArrayViewMutD::from_shape(shape, out).expect("1-D");
                        f.call_into_views(&args, &mut [ArgMut::from(view)])
                            .map_err(fail)?;
                    }};
                }
                match out_dtype {
                    DType::Bool => {
                        let r = f.call(&args).map_err(fail)?;
                        let Value::Bool(r) = &r[0] else {
                            unreachable!("the output dtype is bool")
                        };
                        for (b, &x) in bytes.iter_mut().zip(r.iter()) {
                            *b = u8::from(x);
                        }
                    }
                    DType::U8 => into!(u8),
                    DType::I8 => into!(i8),
                    DType::U16 => into!(u16),
                    DType::U32 => into!(u32),
                    DType::U64 => into!(u64),
                    DType::I16 => into!(i16),
                    DType::I32 => into!(i32),
                    DType::I64 => into!(i64),
                    DType::F32 => into!(f32),
                    DType::F64 => into!(f64),
                }
            }
            None => partials.push(f.call(&args).map_err(fail)?.remove(0)),
        }
        start = end;
        if start >= total {
            break;
        }
    }
    match (kind, out_map) {
        (Shape::Reduce(op), _) => {
            let v = if partials.len() == 1 {
                partials.remove(0)
            } else {
                combine(op, out_dtype, &partials)
            };
            let chunks = partials.len().max(1);
            Ok((
                Some(v),
                format!("streamed {total} elements in {chunks} chunk(s)"),
            ))
        }
        (Shape::Elementwise, Some((map, _, dims))) => {
            map.flush()
                .map_err(|e| CliError::usage(format!("cannot write the output: {e}")))?;
            let path = a.out.as_ref().expect("an element-wise stream has --out");
            let kind = if out_dtype == DType::Bool {
                "boolean"
            } else if out_dtype.is_float() {
                "float"
            } else {
                "integer"
            };
            Ok((
                None,
                format!(
                    "wrote {out_dtype} {kind} array of shape {} to {} (streamed)",
                    shape_text(&dims),
                    path.display()
                ),
            ))
        }
        (Shape::Elementwise, None) => unreachable!("checked before the loop"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::ArrayD;
    use ndarray_npy::WriteNpyExt;

    #[test]
    fn headers_round_trip_with_numpy_layout() {
        let h = header_bytes(DType::F64, &[3, 4]);
        assert_eq!(h.len() % 64, 0);
        let p = parse_header(&h).unwrap();
        assert_eq!(p.dtype, DType::F64);
        assert_eq!(p.shape, vec![3, 4]);
        assert_eq!(p.data_offset, h.len());
        let one = parse_header(&header_bytes(DType::Bool, &[5])).unwrap();
        assert_eq!((one.dtype, one.shape), (DType::Bool, vec![5]));
        let zero_d = parse_header(&header_bytes(DType::I16, &[])).unwrap();
        assert!(zero_d.shape.is_empty());
        // The header ndarray-npy writes parses the same way.
        let mut buf = Vec::new();
        ArrayD::from_elem(IxDyn(&[2, 5]), 1.5f32)
            .write_npy(&mut buf)
            .unwrap();
        let p = parse_header(&buf).unwrap();
        assert_eq!((p.dtype, p.shape), (DType::F32, vec![2, 5]));
    }

    /// A header of `f64[2]` with `from` replaced by `to` in its text.
    fn edited(from: &str, to: &str) -> Vec<u8> {
        let h = header_bytes(DType::F64, &[2, 2]);
        let text = String::from_utf8(h[8..].to_vec())
            .unwrap()
            .replace(from, to);
        let mut out = h[..8].to_vec();
        out.extend_from_slice(text.as_bytes());
        out
    }

    #[test]
    fn bad_headers_are_clear_errors() {
        assert!(parse_header(b"hello world")
            .unwrap_err()
            .contains("not a valid .npy"));
        assert!(parse_header(&edited("False", "True "))
            .unwrap_err()
            .contains("Fortran order"));
        assert!(parse_header(&edited("<f8", ">f8"))
            .unwrap_err()
            .contains("byte order"));
        assert!(parse_header(&edited("<f8", "<c16"))
            .unwrap_err()
            .contains("unsupported dtype '<c16'"));
    }

    #[test]
    fn partials_combine_like_one_reduction() {
        let p = |v: f64| Value::scalar_f64(DType::F32, v);
        let s = combine(ReduceOp::Sum, DType::F32, &[p(1.0), p(2.5)]);
        assert_eq!(s.scalar_as_f64(), Some(3.5));
        let m = combine(ReduceOp::Max, DType::F32, &[p(1.0), p(f64::NAN), p(3.0)]);
        assert!(m.scalar_as_f64().unwrap().is_nan());
        let i = |v: i64| Value::scalar_i64(DType::I64, v);
        let s = combine(ReduceOp::Sum, DType::I64, &[i(i64::MAX), i(1)]);
        assert_eq!(s.scalar_as_f64(), Some(i64::MIN as f64));
        let m = combine(ReduceOp::Min, DType::I64, &[i(4), i(-2), i(7)]);
        assert_eq!(m.scalar_as_f64(), Some(-2.0));
    }
}
