//! Measures the max ULP error of every math function (10^6 points each in
//! release; the f32 kernels on all 2^32 inputs, about 30 s each on
//! two cores) and writes `runtime/ACCURACY.md`. Run with
//! `cargo run --release -p kiln-runtime --example accuracy`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt::Write as _;
use support::*;

fn main() {
    let mut md = String::new();
    writeln!(md, "# kiln-runtime math accuracy\n").unwrap();
    writeln!(
        md,
        "Produced by `cargo run --release -p kiln-runtime --example accuracy` (ISA variant: {:?}). \
         {} random points per function over the listed domain plus the special values \
         ±0, ±inf, NaN, subnormals, ±1e300, f64::MAX. Error in ULPs of the reference; f32 is compared \
         with the f64 reference rounded to f32. References marked 'from std' are compositions of \
         std functions and carry their own ~1 ULP error.\n",
        kiln_runtime::math::isa(),
        points()
    )
    .unwrap();
    writeln!(md, "| function | f64 max ULP | worst f64 x | f64 specials max ULP | f32 max ULP | reference | domain |").unwrap();
    writeln!(md, "|---|---|---|---|---|---|---|").unwrap();
    for u in unary_table() {
        let r = measure(&u, 0x5eed ^ u.name.len() as u64);
        let s = measure_specials(&u);
        let dom: Vec<String> = u
            .domain
            .iter()
            .map(|d| match *d {
                Seg::Uni(a, b) => format!("[{a:e}, {b:e}]"),
                Seg::Log(a, b, s) => format!("{}log[{a:e}, {b:e}]", if s { "±" } else { "" }),
                Seg::NegLog(a, b) => format!("-log[{a:e}, {b:e}]"),
            })
            .collect();
        writeln!(
            md,
            "| {} | {:.3} | {:e} | {:.3} | {:.3} | {} | {} |",
            u.name,
            r.max64.0,
            r.max64.1,
            s.0,
            r.max32.0,
            u.ref_name,
            dom.join(" ∪ ")
        )
        .unwrap();
        println!(
            "{:10} f64 {:.3} (x={:e}) specials {:.3} (x={:e}) f32 {:.3}",
            u.name, r.max64.0, r.max64.1, s.0, s.1, r.max32.0
        );
    }
    binary_row(
        &mut md,
        "pow",
        measure_pow(99),
        measure_pow_specials(),
        "std powf",
        "x∈exp[-23,23]×y∈[-30,30], x∈[0.5,2]×y∈[-1000,1000], x<0 × integer y, x∈exp[-700,700]×y∈[-2,2]; all pairs of specials",
    );
    binary_row(
        &mut md,
        "arctan2",
        measure_atan2(77),
        measure_atan2_specials(),
        "std atan2",
        "(y, x) ∈ [-1,1]², |y|, |x| ∈ exp[-690,690] with random signs, y/x near ±tan(π/8), ±1, ±tan(3π/8); all pairs of specials",
    );
    binary_row(
        &mut md,
        "hypot",
        measure_hypot(41),
        measure_hypot_specials(),
        "std hypot",
        "(x, y) ∈ [-1,1]², |x|, |y| ∈ exp[-745,709] with random signs, |y| ∈ [0.5, 2]·|x|; all pairs of specials",
    );
    binary_row(
        &mut md,
        "sigmoid_binary_crossentropy",
        measure_sigmoid_xent(31),
        measure_sigmoid_xent_specials(),
        "from std: log1p(exp(-|z|)) + ((1-t)·max(z,0) + t·max(-z,0))",
        "z ∈ [-50,50] (1 in 10: [-750,750]) × t ∈ [0,1] (a third exactly 0 or 1); all pairs of specials",
    );

    // sin/cos beyond 1e5.
    writeln!(md, "\n## sin / cos / tan beyond |x| = 1e5\n").unwrap();
    writeln!(
        md,
        "| range | sin f64 max ULP | cos f64 max ULP | tan f64 max ULP |\n|---|---|---|---|"
    )
    .unwrap();
    for (lo, hi) in [(1e5, 1.3e7), (1.3e7, 1e9), (1e9, 1e12), (1e12, 1e300)] {
        let mut row = format!("| [{lo:e}, {hi:e}] ");
        for u in unary_table()
            .into_iter()
            .filter(|u| matches!(u.name, "sin" | "cos" | "tan"))
        {
            let xs = sample(&[Seg::Log(lo, hi, true)], 200_000, 3);
            let mut o = vec![0.0; xs.len()];
            (u.f64)(&xs, &mut o);
            let w = xs
                .iter()
                .zip(&o)
                .map(|(&x, &y)| ulp64(y, (u.reference)(x)))
                .fold(0.0, f64::max);
            write!(row, "| {w:.3e} ").unwrap();
        }
        writeln!(md, "{row}|").unwrap();
    }
    writeln!(
        md,
        "\nFrom |x| = 1.3e7 on (and for ±inf, NaN) the block functions recompute the lane with the C library's correctly reduced function (max error as std's)."
    )
    .unwrap();
    // The f32 kernels, on every f32 input.
    writeln!(md, "\n## f32 kernels on all 2^32 inputs\n").unwrap();
    writeln!(
        md,
        "These f32 forms have a kernel of their own instead of widening to the f64 kernel: in f32 \
         lanes (`single.rs`) or in f64 lanes sized for an f32 result (`lean.rs`). Every bit pattern \
         (NaNs, infinities, zeros, subnormals included) against the f64 reference rounded to f32:\n"
    )
    .unwrap();
    writeln!(
        md,
        "| function | max ULP | worst x | not correctly rounded |\n|---|---|---|---|"
    )
    .unwrap();
    let natives = kiln_runtime::math::native_f32_functions();
    for u in unary_table().iter().filter(|u| natives.contains(&u.name)) {
        let s = sweep_f32(u, 1);
        writeln!(
            md,
            "| {} | {:.3} | {:e} | {} of {} ({:.3}%) |",
            u.name,
            s.max,
            s.worst,
            s.not_rounded,
            s.checked,
            100.0 * s.not_rounded as f64 / s.checked as f64
        )
        .unwrap();
        println!(
            "{:10} f32 all inputs: max {:.3} at {:e}",
            u.name, s.max, s.worst
        );
    }
    // Not measured here: kiln's per-element calls (kept in the file when it is regenerated).
    md.push_str(PER_ELEMENT_NOTE);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/ACCURACY.md");
    std::fs::write(path, md).expect("write ACCURACY.md");
    println!("wrote {path}");
}

/// One table row (and a progress line) of a two-argument function: its
/// worst f64 and f32 errors with their arguments, and its worst special pair.
fn binary_row(
    md: &mut String,
    name: &str,
    (w64, w32): ((f64, f64, f64), (f64, f32, f32)),
    s: (f64, f64, f64),
    reference: &str,
    domain: &str,
) {
    writeln!(
        md,
        "| {name} | {:.3} | ({:e}, {:e}) | {:.3} | {:.3} | {reference} | {domain} |",
        w64.0, w64.1, w64.2, s.0, w32.0
    )
    .unwrap();
    println!(
        "{name:10} f64 {:.3} at ({:e},{:e}) specials {:.3} at ({:e},{:e}) f32 {:.3}",
        w64.0, w64.1, w64.2, s.0, s.1, s.2, w32.0
    );
}

/// The section on the exact block functions and on the functions kiln calls per element instead of from this runtime.
const PER_ELEMENT_NOTE: &str =
    "\n## Exact block functions and per-element calls outside this runtime

Float `fmod`, `%` (numpy's remainder) and `//` (numpy's floor division)
have exact block functions on a kernel's contiguous path
(`math/remainder.rs`: one division, truncation and fused multiply-add per
value, the pairs with |x / y| >= 2^52 or a zero or infinite divisor through
the C library's `fmod`), bit for bit the functions the reference evaluator
uses (Rust's `%`, the platform C library's exact `fmod`, and numpy's
corrections), asserted by the runtime's unit tests and
`tests/jit_vector_paths.rs`; their strided and scalar paths call those
functions per element (`src/linker/codegen/mathcalls.rs`). `arctan2` and
`hypot` have the block functions above on a kernel's contiguous path
(their strided and scalar paths call `f64::atan2` and `f64::hypot` per
element, like the reference). `f32` inputs are computed in
`f64` and rounded once, except by the f32 kernels above.
";
