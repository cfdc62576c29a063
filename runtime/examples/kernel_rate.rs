//! The in-cache rate of the runtime's unary f64 math functions: each named
//! function (default: every unary one) maps 4096 values (in its domain, see
//! `domain`) 20,000 times per round, and the best of five rounds is printed
//! as µs per 4096 values and ns per value. The best of rounds is steadier
//! on a shared machine than criterion's mean, so kernel A/B comparisons use
//! it; `KILN_ISA=avx2` measures the AVX2 variant on an AVX-512 machine;
//! `--f32` measures the f32 forms on the same values rounded to f32;
//! `--fold` measures the row passes of the softmax family instead of any
//! named function (the maximum, and the shifted exp sums at that maximum)
//! on a row of 2000 values in [-3, 3), the logsumexp workload's row length:
//! `cargo run --release -p kiln-runtime --example kernel_rate -- [--f32] tanh exp`,
//! `... --example kernel_rate -- --fold`.

use std::hint::black_box;
use std::time::Instant;

use kiln_runtime::math::{
    exp_shift_store_f64, extreme_f64, isa, math_symbols, sum_exp_at_max_f64, sum_exp_shift_f64,
};

/// Values per call: two 32 KiB buffers, in L1/L2.
const N: usize = 4096;

/// The C signature of a unary block function (`math_symbols`).
type Unary = unsafe extern "C" fn(*const f64, *mut f64, usize);

/// The C signature of a unary f32 block function.
type Unary32 = unsafe extern "C" fn(*const f32, *mut f32, usize);

fn main() {
    let symbols = math_symbols();
    // The unary functions are the ones with a pre-staged form
    // (`kiln_<name>_pre_f64`); the binary ones have none.
    let unary: Vec<&str> = symbols
        .iter()
        .filter_map(|(s, _)| s.strip_prefix("kiln_")?.strip_suffix("_pre_f64"))
        .collect();
    let mut wanted: Vec<String> = std::env::args().skip(1).collect();
    if wanted.iter().any(|a| a == "--fold") {
        fold_rates();
        return;
    }
    let single = wanted.iter().any(|a| a == "--f32");
    wanted.retain(|a| a != "--f32");
    let dtype = if single { "f32" } else { "f64" };
    let names: Vec<&str> = if wanted.is_empty() {
        unary.clone()
    } else {
        wanted.iter().map(String::as_str).collect()
    };
    println!(
        "{:?} variant, {dtype}, {N} values per call, best of 5 rounds",
        isa()
    );
    for name in names {
        let symbol = format!("kiln_{name}_{dtype}");
        let found = symbols.iter().find(|(s, _)| *s == symbol);
        let (Some(&(_, address)), true) = (found, unary.contains(&name)) else {
            eprintln!("{name}: no unary function of that name (known: {unary:?})");
            std::process::exit(2);
        };
        let x: Vec<f64> = (0..N)
            .map(|i| domain(name, (i as f64 / N as f64) * 8.0 - 4.0))
            .collect();
        let best = if single {
            // SAFETY: `name` is unary (it has a pre-staged form), and
            // `math_symbols` lists a unary `kiln_<name>_f32` with the
            // `Unary32` signature.
            let f: Unary32 = unsafe { std::mem::transmute::<*const u8, Unary32>(address) };
            let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            best_time(f, &x)
        } else {
            // SAFETY: as above, `kiln_<name>_f64` has the `Unary` signature.
            let f: Unary = unsafe { std::mem::transmute::<*const u8, Unary>(address) };
            best_time(f, &x)
        };
        println!(
            "{name:>10}: {:7.3} µs per {N}, {:.3} ns per value",
            best * 1e6,
            best * 1e9 / N as f64
        );
    }
}

/// The rates of the row passes of the softmax family on one row of
/// [`FOLD_ROW`] values in [-3, 3) (in L1, as a row between its max pass and
/// its exp pass).
fn fold_rates() {
    let x: Vec<f64> = (0..FOLD_ROW)
        .map(|i| ((i * 7919) % FOLD_ROW) as f64 / FOLD_ROW as f64 * 6.0 - 3.0)
        .collect();
    let m = extreme_f64(&x, true);
    let mut out = vec![0.0; FOLD_ROW];
    println!(
        "{:?} variant, f64, rows of {FOLD_ROW} values, best of 5 rounds",
        isa()
    );
    let passes: [(&str, &mut dyn FnMut() -> f64); 4] = [
        ("max", &mut || extreme_f64(black_box(&x), true)),
        ("sum_exp_shift", &mut || {
            sum_exp_shift_f64(black_box(&x), m, None)
        }),
        ("sum_exp_at_max", &mut || {
            sum_exp_at_max_f64(black_box(&x), m, None)
        }),
        ("exp_shift_store", &mut || {
            exp_shift_store_f64(black_box(&x), m, &mut out, None)
        }),
    ];
    for (name, pass) in passes {
        let reps = 20_000;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            for _ in 0..reps {
                black_box(pass());
            }
            best = best.min(start.elapsed().as_secs_f64() / reps as f64);
        }
        println!(
            "{name:>16}: {:7.3} µs per row, {:.3} ns per value",
            best * 1e6,
            best * 1e9 / FOLD_ROW as f64
        );
    }
}

/// The row length of `--fold`.
const FOLD_ROW: usize = 2000;

/// Maps v in [-4, 4) into the domain of function `name`, where its result
/// is finite: (0.1, 4.1] for the logarithms, its negation for log1mexp,
/// (-0.9, 0.9) for arcsin, arccos and arctanh, [1, 5) for arccosh, v
/// itself otherwise.
fn domain(name: &str, v: f64) -> f64 {
    match name {
        "log" | "log2" | "log10" | "log1p" => v.abs() + 0.1,
        "log1mexp" => -(v.abs() + 0.1),
        "arcsin" | "arccos" | "arctanh" => v / 4.5,
        "arccosh" => v.abs() + 1.0,
        _ => v,
    }
}

/// The best of five rounds of 20,000 calls of `f` on `x`: seconds per call.
fn best_time<T: Copy + Default>(f: unsafe extern "C" fn(*const T, *mut T, usize), x: &[T]) -> f64 {
    let mut out = vec![T::default(); x.len()];
    let reps = 20_000;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..reps {
            // SAFETY: `x` and `out` hold the same number of values.
            unsafe { f(black_box(x.as_ptr()), out.as_mut_ptr(), x.len()) };
        }
        best = best.min(start.elapsed().as_secs_f64() / reps as f64);
    }
    black_box(&out);
    best
}
