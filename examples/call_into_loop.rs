//! `call_into` in a loop: a steady-state loop that reuses its output arrays.
//!
//! A function is compiled once and called many times on new data (here a
//! simple time-stepping loop of a damped oscillator). `call` returns fresh
//! arrays every time; `call_into` writes the results into arrays the caller
//! keeps, so after the first call the loop allocates nothing: the kernel
//! that produces an output writes straight into the caller's array when its
//! dtype and shape match (an array of another dtype or shape is replaced).
//!
//! Run with `cargo run --release --example call_into_loop`.

use kiln::linker::Arg;
use kiln::{function, vector, DType, Value};
use ndarray::{ArrayD, IxDyn};

fn main() -> kiln::Result<()> {
    // One explicit Euler step of x'' = -k x - c x' for many particles at once.
    let (x, v) = (vector("x", DType::F64), vector("v", DType::F64));
    let (k, c, dt) = (4.0, 0.1, 0.01);
    let accel = -k * &x - c * &v;
    let x_next = &x + dt * &v;
    let v_next = &v + dt * &accel;
    let step = function(&[x, v], &[x_next, v_next]).compile()?;

    let n = 100_000;
    let mut state = vec![
        Value::from(ArrayD::from_shape_fn(IxDyn(&[n]), |i| {
            1.0 + i[0] as f64 / n as f64
        })),
        Value::from(ArrayD::<f64>::zeros(IxDyn(&[n]))),
    ];
    // The output arrays, allocated once: `call_into` fills them on every step.
    let mut next = step.call_values(&state)?;
    // The four arrays the loop alternates between.
    let addresses: Vec<usize> = state.iter().chain(&next).map(data_address).collect();
    for _ in 0..1000 {
        let args: Vec<Arg<'_>> = state.iter().map(Arg::from).collect();
        step.call_into(&args, &mut next)?;
        // The new state becomes the input of the next step; the old state's
        // arrays become the next step's output arrays.
        std::mem::swap(&mut state, &mut next);
    }
    let kept = state
        .iter()
        .chain(&next)
        .all(|v| addresses.contains(&data_address(v)));
    println!("1000 steps of {n} particles; output arrays reused: {kept}");
    let Value::F64(x_end) = &state[0] else {
        unreachable!("x is f64")
    };
    println!("x[0] after 10 time units: {:.6}", x_end[0]);
    assert!(kept, "call_into keeps the caller's standard-layout arrays");
    Ok(())
}

/// Address of a value's data, to show that the arrays are reused.
fn data_address(v: &Value) -> usize {
    kiln::with_value!(v, a => a.as_ptr() as usize)
}
