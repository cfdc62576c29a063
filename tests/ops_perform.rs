//! Reference `perform` of every op against hand- and numpy-computed values:
//! broadcasting, empty and 0-d arrays, NaN and infinities, integer wraparound,
//! division by zero, casts and f32 rounding.

// The tables are numpy output, so some entries are the digits of ln 2, sqrt 2, ...
#![allow(clippy::approx_constant)]

mod common;

use common::*;
use kiln::eval::{check_input, evaluate, perform};
use kiln::ops::{CRef, Composite, ScalarConst};
use kiln::*;
use DType::*;
use ScalarOp::*;

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

// Tables generated with numpy 2.4 (math.erf / erfc for the error functions,
// log(-expm1(x)) / log1p(-exp(x)) for log1mexp, logaddexp(0, x) for softplus).
const XS: [f64; 8] = [0.5, 0.0, -0.25, 2.0, INF, -INF, NAN, -3.5];
const UNARY_F64: &[(ScalarOp, [f64; 8])] = &[
    (Neg, [-0.5, -0.0, 0.25, -2.0, -INF, INF, NAN, 3.5]),
    (
        Reciprocal,
        [2.0, INF, -4.0, 0.5, 0.0, -0.0, NAN, -0.2857142857142857],
    ),
    (Abs, [0.5, 0.0, 0.25, 2.0, INF, INF, NAN, 3.5]),
    (Sign, [1.0, 0.0, -1.0, 1.0, 1.0, -1.0, NAN, -1.0]),
    (Sqr, [0.25, 0.0, 0.0625, 4.0, INF, INF, NAN, 12.25]),
    (
        Exp,
        [
            1.6487212707001282,
            1.0,
            0.7788007830714049,
            7.38905609893065,
            INF,
            0.0,
            NAN,
            0.0301973834223185,
        ],
    ),
    (
        Exp2,
        [
            1.4142135623730951,
            1.0,
            0.8408964152537145,
            4.0,
            INF,
            0.0,
            NAN,
            0.08838834764831845,
        ],
    ),
    (
        Expm1,
        [
            0.6487212707001282,
            0.0,
            -0.22119921692859512,
            6.38905609893065,
            INF,
            -1.0,
            NAN,
            -0.9698026165776815,
        ],
    ),
    (
        Log,
        [
            -0.6931471805599453,
            -INF,
            NAN,
            0.6931471805599453,
            INF,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (Log2, [-1.0, -INF, NAN, 1.0, INF, NAN, NAN, NAN]),
    (
        Log10,
        [
            -0.3010299956639812,
            -INF,
            NAN,
            0.3010299956639812,
            INF,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        Log1p,
        [
            0.4054651081081644,
            0.0,
            -0.2876820724517809,
            1.0986122886681098,
            INF,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        Sqrt,
        [
            0.7071067811865476,
            0.0,
            NAN,
            1.4142135623730951,
            INF,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        Sigmoid,
        [
            0.6224593312018546,
            0.5,
            0.4378234991142019,
            0.8807970779778823,
            1.0,
            0.0,
            NAN,
            0.029312230751356316,
        ],
    ),
    (
        Softplus,
        [
            0.9740769841801067,
            0.6931471805599453,
            0.5759394198788436,
            2.1269280110429727,
            INF,
            0.0,
            NAN,
            0.029750418272620566,
        ],
    ),
    (
        Log1mexp,
        [
            NAN,
            -INF,
            -1.5086915494460322,
            NAN,
            NAN,
            -0.0,
            NAN,
            -0.030662716255459632,
        ],
    ),
    (
        Sin,
        [
            0.479425538604203,
            0.0,
            -0.24740395925452294,
            0.9092974268256817,
            NAN,
            NAN,
            NAN,
            0.35078322768961984,
        ],
    ),
    (
        Cos,
        [
            0.8775825618903728,
            1.0,
            0.9689124217106447,
            -0.4161468365471424,
            NAN,
            NAN,
            NAN,
            -0.9364566872907963,
        ],
    ),
    (
        Tan,
        [
            0.5463024898437905,
            0.0,
            -0.25534192122103627,
            -2.185039863261519,
            NAN,
            NAN,
            NAN,
            -0.3745856401585947,
        ],
    ),
    (
        ArcSin,
        [
            0.5235987755982989,
            0.0,
            -0.25268025514207865,
            NAN,
            NAN,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        ArcCos,
        [
            1.0471975511965976,
            1.5707963267948966,
            1.8234765819369754,
            NAN,
            NAN,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        ArcTan,
        [
            0.4636476090008061,
            0.0,
            -0.24497866312686414,
            1.1071487177940904,
            1.5707963267948966,
            -1.5707963267948966,
            NAN,
            -1.2924966677897853,
        ],
    ),
    (
        Sinh,
        [
            0.5210953054937474,
            0.0,
            -0.2526123168081683,
            3.6268604078470186,
            INF,
            -INF,
            NAN,
            -16.542627287634996,
        ],
    ),
    (
        Cosh,
        [
            1.1276259652063807,
            1.0,
            1.0314130998795732,
            3.7621956910836314,
            INF,
            INF,
            NAN,
            16.572824671057315,
        ],
    ),
    (
        Tanh,
        [
            0.46211715726000974,
            0.0,
            -0.24491866240370913,
            0.9640275800758169,
            1.0,
            -1.0,
            NAN,
            -0.9981778976111987,
        ],
    ),
    (
        ArcSinh,
        [
            0.48121182505960347,
            0.0,
            -0.24746646154726346,
            1.4436354751788103,
            INF,
            -INF,
            NAN,
            -1.9657204716496515,
        ],
    ),
    (
        ArcCosh,
        [NAN, NAN, NAN, 1.3169578969248168, INF, NAN, NAN, NAN],
    ),
    (
        ArcTanh,
        [
            0.5493061443340549,
            0.0,
            -0.25541281188299536,
            NAN,
            NAN,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        Erf,
        [
            0.5204998778130465,
            0.0,
            -0.2763263901682369,
            0.9953222650189527,
            1.0,
            -1.0,
            NAN,
            -0.9999992569016276,
        ],
    ),
    (
        Erfc,
        [
            0.4795001221869535,
            1.0,
            1.276326390168237,
            0.004677734981047265,
            0.0,
            2.0,
            NAN,
            1.9999992569016276,
        ],
    ),
    (Floor, [0.0, 0.0, -1.0, 2.0, INF, -INF, NAN, -4.0]),
    (Ceil, [1.0, 0.0, -0.0, 2.0, INF, -INF, NAN, -3.0]),
    (Round, [0.0, 0.0, -0.0, 2.0, INF, -INF, NAN, -4.0]),
    (Identity, [0.5, 0.0, -0.25, 2.0, INF, -INF, NAN, -3.5]),
];
const UNARY_F32: &[(ScalarOp, [f64; 8])] = &[
    (Neg, [-0.5, -0.0, 0.25, -2.0, -INF, INF, NAN, 3.5]),
    (
        Reciprocal,
        [2.0, INF, -4.0, 0.5, 0.0, -0.0, NAN, -0.2857142984867096],
    ),
    (Abs, [0.5, 0.0, 0.25, 2.0, INF, INF, NAN, 3.5]),
    (Sign, [1.0, 0.0, -1.0, 1.0, 1.0, -1.0, NAN, -1.0]),
    (Sqr, [0.25, 0.0, 0.0625, 4.0, INF, INF, NAN, 12.25]),
    (
        Exp,
        [
            1.6487212181091309,
            1.0,
            0.7788007259368896,
            7.3890557289123535,
            INF,
            0.0,
            NAN,
            0.03019738383591175,
        ],
    ),
    (
        Exp2,
        [
            1.4142135381698608,
            1.0,
            0.8408964276313782,
            4.0,
            INF,
            0.0,
            NAN,
            0.0883883461356163,
        ],
    ),
    (
        Expm1,
        [
            0.6487212777137756,
            0.0,
            -0.22119921445846558,
            6.389056205749512,
            INF,
            -1.0,
            NAN,
            -0.9698026180267334,
        ],
    ),
    (
        Log,
        [
            -0.6931471824645996,
            -INF,
            NAN,
            0.6931471824645996,
            INF,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (Log2, [-1.0, -INF, NAN, 1.0, INF, NAN, NAN, NAN]),
    (
        Log10,
        [
            -0.3010300099849701,
            -INF,
            NAN,
            0.3010300099849701,
            INF,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        Log1p,
        [
            0.40546512603759766,
            0.0,
            -0.28768205642700195,
            1.0986123085021973,
            INF,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        Sqrt,
        [
            0.7071067690849304,
            0.0,
            NAN,
            1.4142135381698608,
            INF,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        Sigmoid,
        [
            0.622459352016449,
            0.5,
            0.43782350420951843,
            0.8807970881462097,
            1.0,
            0.0,
            NAN,
            0.02931223064661026,
        ],
    ),
    (
        Softplus,
        [
            0.9740769863128662,
            0.6931471824645996,
            0.575939416885376,
            2.1269280910491943,
            INF,
            0.0,
            NAN,
            0.029750417917966843,
        ],
    ),
    (
        Log1mexp,
        [
            NAN,
            -INF,
            -1.5086915493011475,
            NAN,
            NAN,
            -0.0,
            NAN,
            -0.030662715435028076,
        ],
    ),
    (
        Sin,
        [
            0.4794255495071411,
            0.0,
            -0.24740396440029144,
            0.9092974066734314,
            NAN,
            NAN,
            NAN,
            0.35078322887420654,
        ],
    ),
    (
        Cos,
        [
            0.8775825500488281,
            1.0,
            0.9689124226570129,
            -0.41614681482315063,
            NAN,
            NAN,
            NAN,
            -0.9364566802978516,
        ],
    ),
    (
        Tan,
        [
            0.5463024973869324,
            0.0,
            -0.25534191727638245,
            -2.18503999710083,
            NAN,
            NAN,
            NAN,
            -0.3745856285095215,
        ],
    ),
    (
        ArcSin,
        [
            0.5235987901687622,
            0.0,
            -0.252680242061615,
            NAN,
            NAN,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        ArcCos,
        [
            1.0471975803375244,
            1.5707963705062866,
            1.8234765529632568,
            NAN,
            NAN,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        ArcTan,
        [
            0.46364760398864746,
            0.0,
            -0.244978666305542,
            1.1071487665176392,
            1.5707963705062866,
            -1.5707963705062866,
            NAN,
            -1.292496681213379,
        ],
    ),
    (
        Sinh,
        [
            0.5210952758789062,
            0.0,
            -0.25261232256889343,
            3.6268603801727295,
            INF,
            -INF,
            NAN,
            -16.542627334594727,
        ],
    ),
    (
        Cosh,
        [
            1.1276260614395142,
            1.0,
            1.031413197517395,
            3.762195587158203,
            INF,
            INF,
            NAN,
            16.572824478149414,
        ],
    ),
    (
        Tanh,
        [
            0.46211719512939453,
            0.0,
            -0.24491865932941437,
            0.9640275835990906,
            1.0,
            -1.0,
            NAN,
            -0.9981778860092163,
        ],
    ),
    (
        ArcSinh,
        [
            0.4812118113040924,
            0.0,
            -0.24746645987033844,
            1.4436354637145996,
            INF,
            -INF,
            NAN,
            -1.9657204151153564,
        ],
    ),
    (
        ArcCosh,
        [NAN, NAN, NAN, 1.316957950592041, INF, NAN, NAN, NAN],
    ),
    (
        ArcTanh,
        [
            0.5493061542510986,
            0.0,
            -0.2554128170013428,
            NAN,
            NAN,
            NAN,
            NAN,
            NAN,
        ],
    ),
    (
        Erf,
        [
            0.5204998850822449,
            0.0,
            -0.27632638812065125,
            0.9953222870826721,
            1.0,
            -1.0,
            NAN,
            -0.9999992847442627,
        ],
    ),
    (
        Erfc,
        [
            0.4795001149177551,
            1.0,
            1.2763264179229736,
            0.004677734803408384,
            0.0,
            2.0,
            NAN,
            1.9999992847442627,
        ],
    ),
    (Floor, [0.0, 0.0, -1.0, 2.0, INF, -INF, NAN, -4.0]),
    (Ceil, [1.0, 0.0, -0.0, 2.0, INF, -INF, NAN, -3.0]),
    (Round, [0.0, 0.0, -0.0, 2.0, INF, -INF, NAN, -4.0]),
    (Identity, [0.5, 0.0, -0.25, 2.0, INF, -INF, NAN, -3.5]),
];
const BA: [f64; 14] = [
    -7.0, 7.0, -7.5, 1.0, -4.0, 5.0, -5.0, INF, 1.0, 0.0, NAN, 3.0, -0.0, 2.0,
];
const BB: [f64; 14] = [
    2.0, -2.0, 2.0, 0.0, 2.0, INF, INF, 2.0, 0.1, 0.0, 1.0, NAN, 0.0, 0.5,
];
const BINARY_F64: &[(ScalarOp, [f64; 14])] = &[
    (
        Sub,
        [
            -9.0, 9.0, -9.5, 1.0, -6.0, -INF, -INF, INF, 0.9, 0.0, NAN, NAN, -0.0, 1.5,
        ],
    ),
    (
        TrueDiv,
        [
            -3.5, -3.5, -3.75, INF, -2.0, 0.0, -0.0, INF, 10.0, NAN, NAN, NAN, NAN, 4.0,
        ],
    ),
    (
        IntDiv,
        [
            -4.0, -4.0, -4.0, INF, -2.0, 0.0, -1.0, NAN, 9.0, NAN, NAN, NAN, NAN, 4.0,
        ],
    ),
    (
        Mod,
        [
            1.0,
            -1.0,
            0.5,
            NAN,
            0.0,
            5.0,
            INF,
            NAN,
            0.09999999999999995,
            NAN,
            NAN,
            NAN,
            NAN,
            0.0,
        ],
    ),
    (
        Pow,
        [
            49.0,
            0.02040816326530612,
            56.25,
            1.0,
            16.0,
            INF,
            INF,
            INF,
            1.0,
            1.0,
            NAN,
            NAN,
            1.0,
            1.4142135623730951,
        ],
    ),
    (
        Maximum,
        [
            2.0, 7.0, 2.0, 1.0, 2.0, INF, INF, INF, 1.0, 0.0, NAN, NAN, 0.0, 2.0,
        ],
    ),
    (
        Minimum,
        [
            -7.0, -2.0, -7.5, 0.0, -4.0, 5.0, -5.0, 2.0, 0.1, 0.0, NAN, NAN, 0.0, 0.5,
        ],
    ),
    (
        Lt,
        [
            1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        ],
    ),
    (
        Le,
        [
            1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0,
        ],
    ),
    (
        Gt,
        [
            0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
        ],
    ),
    (
        Ge,
        [
            0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0,
        ],
    ),
    (
        Eq,
        [
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0,
        ],
    ),
    (
        Neq,
        [
            1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0,
        ],
    ),
    (
        Add,
        [
            -5.0, 5.0, -5.5, 1.0, -2.0, INF, INF, INF, 1.1, 0.0, NAN, NAN, 0.0, 2.5,
        ],
    ),
    (
        Mul,
        [
            -14.0, -14.0, -15.0, 0.0, -8.0, INF, -INF, INF, 0.1, 0.0, NAN, NAN, -0.0, 1.0,
        ],
    ),
];

fn ew(op: ScalarOp, inputs: &[&Value]) -> Value {
    perf1(&Op::elemwise(op), inputs)
}

#[test]
fn every_unary_float_op_matches_numpy_in_f64() {
    let x = vf(&XS);
    for (op, want) in UNARY_F64 {
        let got = ew(*op, &[&x]);
        assert_eq!(got.dtype(), F64, "{op}");
        assert!(
            close(&flat(&got), want, 4e-16),
            "{op}: got {:?}, want {want:?}",
            flat(&got)
        );
    }
    // Sign and rounding keep the sign of zero where numpy does.
    let z = ew(Round, &[&vf(&[-0.25, 0.5, -1.5, 2.5])]);
    assert_eq!(
        flat(&z)
            .iter()
            .map(|v| v.is_sign_negative())
            .collect::<Vec<_>>(),
        [true, false, true, false]
    );
}

#[test]
fn every_unary_float_op_matches_numpy_in_f32() {
    let x = val(&[8], XS.iter().map(|&v| v as f32).collect::<Vec<f32>>());
    for (op, want) in UNARY_F32 {
        let got = ew(*op, &[&x]);
        assert_eq!(got.dtype(), F32, "{op}");
        // Computed in f64 and rounded once: within one f32 ulp of numpy's f32 kernels.
        assert!(
            close(&flat(&got), want, 1.2e-7),
            "{op}: got {:?}, want {want:?}",
            flat(&got)
        );
    }
}

#[test]
fn float_functions_of_integers_upgrade_to_float() {
    let i = val(&[3], vec![1i64, 4, 9]);
    let r = ew(Sqrt, &[&i]);
    assert_value(&r, F64, &[3], &[1.0, 2.0, 3.0]);
    let b = val(&[2], vec![true, false]);
    assert_value(
        &ew(Exp, &[&b]),
        F32,
        &[2],
        &[std::f32::consts::E as f64, 1.0],
    );
    let u = val(&[2], vec![0u8, 255]);
    assert_value(
        &ew(Reciprocal, &[&u]),
        F32,
        &[2],
        &[INF, (1.0f32 / 255.0) as f64],
    );
    assert_value(
        &ew(TrueDiv, &[&vi(&[7, -7, 1, 0]), &vi(&[2, 2, 0, 0])]),
        F64,
        &[4],
        &[3.5, -3.5, INF, NAN],
    );
    // Rounding an integer keeps its dtype, as numpy.
    assert_value(&ew(Floor, &[&vi(&[-3])]), I64, &[1], &[-3.0]);
    assert_value(
        &ew(Round, &[&val(&[2], vec![-7i8, 5])]),
        I8,
        &[2],
        &[-7.0, 5.0],
    );
}

#[test]
fn binary_float_ops_match_numpy() {
    let (a, b) = (vf(&BA), vf(&BB));
    for (op, want) in BINARY_F64 {
        let got = ew(*op, &[&a, &b]);
        let want_dtype = if op.is_comparison() { Bool } else { F64 };
        assert_eq!(got.dtype(), want_dtype, "{op}");
        assert!(
            close(&flat(&got), want, 2e-16),
            "{op}: got {:?}, want {want:?}",
            flat(&got)
        );
    }
}

#[test]
fn float_floor_division_and_modulo_follow_numpy_divmod() {
    // numpy's floor_divide is the quotient of divmod, not floor(a / b).
    let q = ew(
        IntDiv,
        &[
            &vf(&[1.0, -5.0, INF, 7.0, -0.0]),
            &vf(&[0.1, INF, 2.0, 0.0, 3.0]),
        ],
    );
    assert!(
        close(&flat(&q), &[9.0, -1.0, NAN, INF, -0.0], 0.0),
        "{:?}",
        flat(&q)
    );
    // A zero remainder takes the sign of the divisor.
    let m = ew(Mod, &[&vf(&[-4.0, 4.0, 0.0]), &vf(&[2.0, -2.0, -3.0])]);
    let signs: Vec<bool> = flat(&m)
        .iter()
        .map(|v| *v == 0.0 && v.is_sign_negative())
        .collect();
    assert_eq!(signs, [false, true, true]);
}

type IntRows = &'static [(ScalarOp, &'static [i64])];

const I8_A: [i64; 8] = [100, -128, -7, 7, -7, 0, 127, 5];
const I8_B: [i64; 8] = [100, -1, 2, -2, 0, 0, 1, 3];
const I8_ROWS: IntRows = &[
    (Add, &[-56, 127, -5, 5, -7, 0, -128, 8]),
    (Sub, &[0, -127, -9, 9, -7, 0, 126, 2]),
    (Mul, &[16, -128, -14, -14, 0, 0, 127, 15]),
    (IntDiv, &[1, -128, -4, -4, 0, 0, 127, 1]),
    (Mod, &[0, 0, 1, -1, 0, 0, 0, 2]),
    (Maximum, &[100, -1, 2, 7, 0, 0, 127, 5]),
    (Minimum, &[100, -128, -7, -2, -7, 0, 1, 3]),
    (And, &[100, -128, 0, 6, 0, 0, 1, 1]),
    (Or, &[100, -1, -5, -1, -7, 0, 127, 7]),
    (Xor, &[0, 127, -5, -7, -7, 0, 126, 6]),
    (Lt, &[0, 1, 1, 0, 1, 0, 0, 0]),
    (Eq, &[1, 0, 0, 0, 0, 1, 0, 0]),
    (Neg, &[-100, -128, 7, -7, 7, 0, -127, -5]),
    (Abs, &[100, -128, 7, 7, 7, 0, 127, 5]),
    (Sign, &[1, -1, -1, 1, -1, 0, 1, 1]),
    (Sqr, &[16, 0, 49, 49, 49, 0, 1, 25]),
    (Invert, &[-101, 127, 6, -8, 6, -1, -128, -6]),
];

const U8_A: [i64; 8] = [200, 3, 7, 255, 0, 9, 1, 128];
const U8_B: [i64; 8] = [100, 5, 2, 255, 0, 0, 3, 2];
const U8_ROWS: IntRows = &[
    (Add, &[44, 8, 9, 254, 0, 9, 4, 130]),
    (Sub, &[100, 254, 5, 0, 0, 9, 254, 126]),
    (Mul, &[32, 15, 14, 1, 0, 0, 3, 0]),
    (IntDiv, &[2, 0, 3, 1, 0, 0, 0, 64]),
    (Mod, &[0, 3, 1, 0, 0, 0, 1, 0]),
    (Maximum, &[200, 5, 7, 255, 0, 9, 3, 128]),
    (Minimum, &[100, 3, 2, 255, 0, 0, 1, 2]),
    (And, &[64, 1, 2, 255, 0, 0, 1, 0]),
    (Or, &[236, 7, 7, 255, 0, 9, 3, 130]),
    (Xor, &[172, 6, 5, 0, 0, 9, 2, 130]),
    (Lt, &[0, 1, 0, 0, 0, 0, 1, 0]),
    (Eq, &[0, 0, 0, 1, 1, 0, 0, 0]),
    (Neg, &[56, 253, 249, 1, 0, 247, 255, 128]),
    (Abs, &[200, 3, 7, 255, 0, 9, 1, 128]),
    (Sign, &[1, 1, 1, 1, 0, 1, 1, 1]),
    (Sqr, &[64, 9, 49, 1, 0, 81, 1, 0]),
    (Invert, &[55, 252, 248, 0, 255, 246, 254, 127]),
];

const I64_A: [i64; 8] = [1 << 62, i64::MIN, -7, 7, -7, 0, i64::MAX, 5];
const I64_B: [i64; 8] = [4, -1, 2, -2, 0, 0, 1, 3];
const I64_ROWS: IntRows = &[
    (
        Add,
        &[
            4611686018427387908,
            9223372036854775807,
            -5,
            5,
            -7,
            0,
            -9223372036854775808,
            8,
        ],
    ),
    (
        Sub,
        &[
            4611686018427387900,
            -9223372036854775807,
            -9,
            9,
            -7,
            0,
            9223372036854775806,
            2,
        ],
    ),
    (
        Mul,
        &[
            0,
            -9223372036854775808,
            -14,
            -14,
            0,
            0,
            9223372036854775807,
            15,
        ],
    ),
    (
        IntDiv,
        &[
            1152921504606846976,
            -9223372036854775808,
            -4,
            -4,
            0,
            0,
            9223372036854775807,
            1,
        ],
    ),
    (Mod, &[0, 0, 1, -1, 0, 0, 0, 2]),
    (
        Maximum,
        &[4611686018427387904, -1, 2, 7, 0, 0, 9223372036854775807, 5],
    ),
    (Minimum, &[4, -9223372036854775808, -7, -2, -7, 0, 1, 3]),
    (And, &[0, -9223372036854775808, 0, 6, 0, 0, 1, 1]),
    (
        Or,
        &[
            4611686018427387908,
            -1,
            -5,
            -1,
            -7,
            0,
            9223372036854775807,
            7,
        ],
    ),
    (
        Xor,
        &[
            4611686018427387908,
            9223372036854775807,
            -5,
            -7,
            -7,
            0,
            9223372036854775806,
            6,
        ],
    ),
    (Lt, &[0, 1, 1, 0, 1, 0, 0, 0]),
    (Eq, &[0, 0, 0, 0, 0, 1, 0, 0]),
    (
        Neg,
        &[
            -4611686018427387904,
            -9223372036854775808,
            7,
            -7,
            7,
            0,
            -9223372036854775807,
            -5,
        ],
    ),
    (
        Abs,
        &[
            4611686018427387904,
            -9223372036854775808,
            7,
            7,
            7,
            0,
            9223372036854775807,
            5,
        ],
    ),
    (Sign, &[1, -1, -1, 1, -1, 0, 1, 1]),
    (Sqr, &[0, 0, 49, 49, 49, 0, 1, 25]),
    (
        Invert,
        &[
            -4611686018427387905,
            9223372036854775807,
            6,
            -8,
            6,
            -1,
            -9223372036854775808,
            -6,
        ],
    ),
];

fn check_int_rows(dtype: DType, a: &[i64], b: &[i64], rows: IntRows) {
    let a = Value::from_i64_array(dtype, ndarray::arr1(a).into_dyn());
    let b = Value::from_i64_array(dtype, ndarray::arr1(b).into_dyn());
    for (op, want) in rows {
        let got = if op.arity() == kiln::ops::Arity::Fixed(1) {
            ew(*op, &[&a])
        } else {
            ew(*op, &[&a, &b])
        };
        let want_dtype = if op.is_comparison() { Bool } else { dtype };
        assert_eq!(got.dtype(), want_dtype, "{op} on {dtype}");
        assert_eq!(flat_i(&got), *want, "{op} on {dtype}");
    }
}

#[test]
fn integer_ops_wrap_and_divide_like_numpy_without_trapping() {
    check_int_rows(I8, &I8_A, &I8_B, I8_ROWS);
    check_int_rows(U8, &U8_A, &U8_B, U8_ROWS);
    check_int_rows(I64, &I64_A, &I64_B, I64_ROWS);
    let i16 = Value::from_i64_array(I16, ndarray::arr1(&[300, -32768]).into_dyn());
    assert_eq!(flat_i(&ew(Mul, &[&i16, &i16])), [24464, 0]);
    let i32 = Value::from_i64_array(I32, ndarray::arr1(&[i32::MAX as i64]).into_dyn());
    assert_eq!(flat_i(&ew(Add, &[&i32, &i32])), [-2]);
}

#[test]
fn integer_power() {
    let p = ew(
        Pow,
        &[
            &vi(&[2, 3, -2, 0, -1, 5, 2, 1, -1, 0]),
            &vi(&[63, 4, 3, 0, 7, 0, -1, -3, -3, -2]),
        ],
    );
    assert_eq!(p.dtype(), I64);
    assert_eq!(flat_i(&p), [i64::MIN, 81, -8, 1, -1, 1, 0, 1, -1, 0]);
    let i8 = Value::from_i64_array(I8, ndarray::arr1(&[2, 3, -2]).into_dyn());
    let e = Value::from_i64_array(I8, ndarray::arr1(&[7, 5, 7]).into_dyn());
    assert_eq!(flat_i(&ew(Pow, &[&i8, &e])), [-128, -13, -128]);
}

#[test]
fn bool_logic_and_bool_arithmetic() {
    let a = val(&[4], vec![true, true, false, false]);
    let b = val(&[4], vec![true, false, true, false]);
    assert_value(&ew(And, &[&a, &b]), Bool, &[4], &[1.0, 0.0, 0.0, 0.0]);
    assert_value(&ew(Or, &[&a, &b]), Bool, &[4], &[1.0, 1.0, 1.0, 0.0]);
    assert_value(&ew(Xor, &[&a, &b]), Bool, &[4], &[0.0, 1.0, 1.0, 0.0]);
    assert_value(&ew(Invert, &[&a]), Bool, &[4], &[0.0, 0.0, 1.0, 1.0]);
    // As numpy: `+` is or, `*` is and, `**` is computed in i8.
    assert_value(&ew(Add, &[&a, &b]), Bool, &[4], &[1.0, 1.0, 1.0, 0.0]);
    assert_value(&ew(Add, &[&a, &b, &b]), Bool, &[4], &[1.0, 1.0, 1.0, 0.0]);
    assert_value(&ew(Mul, &[&a, &b]), Bool, &[4], &[1.0, 0.0, 0.0, 0.0]);
    assert_value(&ew(Pow, &[&a, &b]), I8, &[4], &[1.0, 1.0, 0.0, 1.0]);
    assert_value(&ew(Maximum, &[&a, &b]), Bool, &[4], &[1.0, 1.0, 1.0, 0.0]);
    // Mixed bool / int logic is bitwise.
    assert_value(
        &ew(And, &[&a, &vi(&[6, 7, 7, 7])]),
        I64,
        &[4],
        &[0.0, 1.0, 0.0, 0.0],
    );
}

#[test]
fn maximum_minimum_clip_propagate_nan_and_handle_infinities() {
    let a = vf(&[NAN, 1.0, -INF, 3.0]);
    let b = vf(&[1.0, NAN, INF, -0.5]);
    assert_value(&ew(Maximum, &[&a, &b]), F64, &[4], &[NAN, NAN, INF, 3.0]);
    assert_value(&ew(Minimum, &[&a, &b]), F64, &[4], &[NAN, NAN, -INF, -0.5]);
    let x = vf(&[-5.0, 0.5, 5.0, NAN, INF, -INF]);
    let c = perform(
        &Op::elemwise(Clip),
        &[&x, &f64s(&[1], &[0.0]), &f64s(&[1], &[1.0])],
        &[
            &x.tensor_type(),
            &TensorType::new(F64, vec![Some(1)]),
            &TensorType::new(F64, vec![Some(1)]),
        ],
    )
    .unwrap()
    .remove(0);
    assert_value(&c, F64, &[6], &[0.0, 0.5, 1.0, NAN, 1.0, 0.0]);
    let ci = ew(Clip, &[&vi(&[-5, 3, 9]), &vi(&[0, 0, 0]), &vi(&[4, 4, 4])]);
    assert_value(&ci, I64, &[3], &[0.0, 3.0, 4.0]);
}

#[test]
fn switch_second_identity() {
    let c = val(&[3], vec![true, false, true]);
    assert_value(
        &ew(
            Switch,
            &[&c, &vf(&[1.0, 2.0, 3.0]), &vf(&[-1.0, -2.0, -3.0])],
        ),
        F64,
        &[3],
        &[1.0, -2.0, 3.0],
    );
    // A float condition is true when nonzero, NaN included (numpy `where`),
    // also when the branches are integers.
    let fc = vf(&[0.5, NAN, 0.0, -0.0]);
    assert_value(
        &ew(Switch, &[&fc, &vi(&[1, 1, 1, 1]), &vi(&[2, 2, 2, 2])]),
        I64,
        &[4],
        &[1.0, 1.0, 2.0, 2.0],
    );
    assert_value(
        &ew(Switch, &[&fc, &vf(&[1.0; 4]), &vf(&[2.0; 4])]),
        F64,
        &[4],
        &[1.0, 1.0, 2.0, 2.0],
    );
    // Branches of different dtypes upcast.
    let mixed = ew(
        Switch,
        &[
            &c,
            &val(&[3], vec![1i8, 2, 3]),
            &val(&[3], vec![200u8, 201, 202]),
        ],
    );
    assert_value(&mixed, I16, &[3], &[1.0, 201.0, 3.0]);
    assert_value(
        &ew(Second, &[&vf(&[9.0, 9.0]), &vi(&[4, 5])]),
        I64,
        &[2],
        &[4.0, 5.0],
    );
    assert_value(
        &ew(Identity, &[&val(&[2], vec![-3i8, 4])]),
        I8,
        &[2],
        &[-3.0, 4.0],
    );
}

#[test]
fn casts_saturate_truncate_and_map_nan_to_zero() {
    let x = vf(&[NAN, 1e300, -1e300, 3.9, -3.9, 300.0, -1.0, INF]);
    let cast = |d| ew(Cast(d), &[&x]);
    assert_eq!(
        flat_i(&cast(I32)),
        [
            0,
            i32::MAX as i64,
            i32::MIN as i64,
            3,
            -3,
            300,
            -1,
            i32::MAX as i64
        ]
    );
    assert_eq!(
        flat_i(&cast(I64)),
        [0, i64::MAX, i64::MIN, 3, -3, 300, -1, i64::MAX]
    );
    assert_eq!(flat_i(&cast(I8)), [0, 127, -128, 3, -3, 127, -1, 127]);
    assert_eq!(flat_i(&cast(U8)), [0, 255, 0, 3, 0, 255, 0, 255]);
    assert_eq!(
        flat_i(&cast(I16)),
        [0, 32767, -32768, 3, -3, 300, -1, 32767]
    );
    // NaN is truthy, as in numpy.
    assert_eq!(flat_i(&cast(Bool)), [1, 1, 1, 1, 1, 1, 1, 1]);
    assert_value(
        &cast(F32),
        F32,
        &[8],
        &[
            NAN,
            INF,
            -INF,
            3.9f32 as f64,
            -3.9f32 as f64,
            300.0,
            -1.0,
            INF,
        ],
    );
    // The element-wise cast agrees with Value::cast.
    for d in DType::ALL {
        assert!(cast(d).same_as(&x.cast(d)), "{d}");
    }
    // Integer to integer casts wrap; to bool test nonzero.
    let i = vi(&[300, -129, 255, 0, 1 << 40]);
    assert_eq!(flat_i(&ew(Cast(I8), &[&i])), [44, 127, -1, 0, 0]);
    assert_eq!(flat_i(&ew(Cast(U8), &[&i])), [44, 127, 255, 0, 0]);
    assert_eq!(flat_i(&ew(Cast(Bool), &[&i])), [1, 1, 1, 0, 1]);
    assert_value(
        &ew(Cast(F32), &[&vi(&[16777217])]),
        F32,
        &[1],
        &[16777216.0],
    );
    assert_value(
        &ew(Cast(F64), &[&val(&[2], vec![true, false])]),
        F64,
        &[2],
        &[1.0, 0.0],
    );
}

#[test]
fn f32_arithmetic_rounds_to_f32() {
    let a = val(&[3], vec![16777216.0f32, 0.1, 1.0]);
    let b = val(&[3], vec![1.0f32, 0.2, 3.0]);
    let s = ew(Add, &[&a, &b]);
    assert_eq!(s.dtype(), F32);
    assert_eq!(flat(&s), [16777216.0, (0.1f32 + 0.2f32) as f64, 4.0]);
    let q = ew(TrueDiv, &[&b, &a]);
    assert_eq!(flat(&q)[2], (3.0f32 / 1.0f32) as f64);
    assert_eq!(flat(&ew(TrueDiv, &[&a, &b]))[2], (1.0f32 / 3.0f32) as f64);
    // Mixed f32 / f64 computes in f64.
    let m = ew(Add, &[&a, &vf(&[1.0, 0.2, 3.0])]);
    assert_eq!(m.dtype(), F64);
    assert_eq!(flat(&m)[1], 0.1f32 as f64 + 0.2);
}

#[test]
fn broadcasting_empty_and_zero_d_arrays() {
    let col = f64s(&[2, 1], &[1.0, 2.0]);
    let row = f64s(&[1, 3], &[10.0, 20.0, 30.0]);
    assert_value(
        &ew(Add, &[&col, &row]),
        F64,
        &[2, 3],
        &[11.0, 21.0, 31.0, 12.0, 22.0, 32.0],
    );
    let s = Value::scalar_f64(F64, 2.0);
    assert_value(&ew(Mul, &[&s, &s]), F64, &[], &[4.0]);
    let empty = f64s(&[0, 3], &[]);
    assert_value(&ew(Add, &[&empty, &row]), F64, &[0, 3], &[]);
    assert_value(&ew(Exp, &[&empty]), F64, &[0, 3], &[]);
    assert_value(
        &ew(Add, &[&f64s(&[2, 0], &[]), &f64s(&[1, 0], &[])]),
        F64,
        &[2, 0],
        &[],
    );
    // Variadic add of three broadcasting inputs.
    let third = f64s(&[1, 1], &[100.0]);
    assert_value(
        &ew(Add, &[&col, &row, &third]),
        F64,
        &[2, 3],
        &[111.0, 121.0, 131.0, 112.0, 122.0, 132.0],
    );
}

#[test]
fn elemwise_runtime_shape_errors_follow_the_static_rule() {
    let x = vector("x", F64);
    let y = vector("y", F64);
    let fg = FunctionGraph::new(&[x.clone(), y.clone()], &[&x + &y]).unwrap();
    // Unknown static sizes never broadcast, even when one is 1 at run time.
    let e = evaluate(&fg, &[vf(&[1.0, 2.0, 3.0]), vf(&[1.0])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in add: shape mismatch in dimension 0: sizes 3 and 1 (input 1); only dimensions of static size 1 broadcast"
    );
    assert_eq!(
        flat(&evaluate(&fg, &[vf(&[1.0, 2.0]), vf(&[3.0, 4.0])]).unwrap()[0]),
        [4.0, 6.0]
    );
    // A value that contradicts a broadcastable static type.
    let t1 = TensorType::new(F64, vec![Some(1)]);
    let t3 = TensorType::new(F64, vec![None]);
    let e = perform(
        &Op::elemwise(Add),
        &[&vf(&[1.0, 2.0, 3.0]), &vf(&[1.0, 2.0, 3.0])],
        &[&t3, &t1],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in add: input 1 is broadcastable in dimension 0 but has size 3"
    );
    let e = perform(
        &Op::elemwise(Add),
        &[&vf(&[1.0]), &f64s(&[1, 1], &[1.0])],
        &[&t3, &t3],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in add: input 1 has 2 dimensions, expected 1"
    );
}

#[test]
fn composite_perform_multi_output_with_broadcasting_and_narrow_rounding() {
    let mut c = Composite::new(vec![I8, F64]);
    let s = c
        .push(
            Add,
            &[CRef::Input(0), CRef::Const(ScalarConst::new(I8, 100.0))],
        )
        .unwrap();
    let m = c.push(Mul, &[s, CRef::Input(1)]).unwrap();
    let lt = c
        .push(
            Lt,
            &[CRef::Input(1), CRef::Const(ScalarConst::new(F64, 0.0))],
        )
        .unwrap();
    c.outputs = vec![s, m, lt];
    c.check().unwrap();
    let op = Op::composite(c);
    let a = val(&[2, 1], vec![27i8, 100]);
    let b = f64s(&[1, 3], &[1.0, -0.5, NAN]);
    let outs = perf(&op, &[&a, &b]).unwrap();
    assert_eq!(outs.len(), 3);
    // i8 addition wraps (100 + 100 = -56) before the f64 multiply, as unfused nodes would.
    // Every output has the broadcast shape.
    assert_value(
        &outs[0],
        I8,
        &[2, 3],
        &[127.0, 127.0, 127.0, -56.0, -56.0, -56.0],
    );
    assert_value(
        &outs[1],
        F64,
        &[2, 3],
        &[127.0, -63.5, NAN, -56.0, 28.0, NAN],
    );
    assert_value(&outs[2], Bool, &[2, 3], &[0.0, 1.0, 0.0, 0.0, 1.0, 0.0]);
    // ...which is exactly the unfused evaluation.
    let s2 = ew(Add, &[&a, &val(&[1, 1], vec![100i8])]);
    let m2 = ew(Mul, &[&s2, &b]);
    assert!(m2.same_as(&outs[1]));
}

#[test]
fn composite_float_to_int_cast_saturates_like_elemwise() {
    let mut c = Composite::new(vec![F64]);
    let k = c.push(Cast(I32), &[CRef::Input(0)]).unwrap();
    c.outputs = vec![k];
    let x = vf(&[1e10, -1e10, NAN, 2.7]);
    let got = perf1(&Op::composite(c), &[&x]);
    assert_eq!(flat_i(&got), flat_i(&ew(Cast(I32), &[&x])));
    assert_eq!(flat_i(&got), [i32::MAX as i64, i32::MIN as i64, 0, 2]);
}

#[test]
fn composite_switch_with_float_condition() {
    let mut c = Composite::new(vec![F64, I64]);
    let s = c
        .push(
            Switch,
            &[
                CRef::Input(0),
                CRef::Input(1),
                CRef::Const(ScalarConst::new(I64, -1.0)),
            ],
        )
        .unwrap();
    c.outputs = vec![s];
    let got = perf1(
        &Op::composite(c),
        &[&vf(&[0.25, 0.0, NAN]), &vi(&[7, 8, 9])],
    );
    assert_value(&got, I64, &[3], &[7.0, -1.0, 9.0]);
}

// ----- DimShuffle --------------------------------------------------------------

fn ds(input_ndim: usize, order: &[Option<usize>]) -> Op {
    Op::DimShuffle {
        input_ndim,
        new_order: order.to_vec(),
    }
}

#[test]
fn dimshuffle_permutes_drops_and_inserts() {
    let m = f64s(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_value(
        &perf1(&ds(2, &[Some(1), Some(0)]), &[&m]),
        F64,
        &[3, 2],
        &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0],
    );
    assert_value(
        &perf1(&ds(2, &[None, Some(1), None, Some(0)]), &[&m]),
        F64,
        &[1, 3, 1, 2],
        &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0],
    );
    let x = val(&[1, 3, 1], vec![7i8, 8, 9]);
    assert_value(
        &perf1(&ds(3, &[Some(1)]), &[&x]),
        I8,
        &[3],
        &[7.0, 8.0, 9.0],
    );
    assert_value(
        &perf1(&ds(3, &[Some(2), Some(1)]), &[&x]),
        I8,
        &[1, 3],
        &[7.0, 8.0, 9.0],
    );
    let s = Value::scalar_f64(F32, 1.5);
    assert_value(&perf1(&ds(0, &[None, None]), &[&s]), F32, &[1, 1], &[1.5]);
    assert_value(
        &perf1(&ds(2, &[]), &[&f64s(&[1, 1], &[4.0])]),
        F64,
        &[],
        &[4.0],
    );
    let e = f64s(&[0, 2], &[]);
    assert_value(
        &perf1(&ds(2, &[Some(1), None, Some(0)]), &[&e]),
        F64,
        &[2, 1, 0],
        &[],
    );
    // 3-d permutation.
    let c = val(&[2, 1, 2], vec![1i64, 2, 3, 4]);
    assert_value(
        &perf1(&ds(3, &[Some(2), Some(0), Some(1)]), &[&c]),
        I64,
        &[2, 2, 1],
        &[1.0, 3.0, 2.0, 4.0],
    );
    // Dropping a dimension that is not 1 at run time is an error.
    let e = perform(
        &ds(2, &[Some(1)]),
        &[&m],
        &[&TensorType::new(F64, vec![Some(1), None])],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in DimShuffle{1}: dropped dimension 0 has size 2"
    );
}

// ----- CAReduce ------------------------------------------------------------------

fn red(op: ReduceOp, axes: Option<&[usize]>) -> Op {
    Op::CAReduce {
        op,
        axes: axes.map(|a| a.to_vec()),
    }
}

fn arange3() -> Value {
    f64s(&[2, 3, 4], &(0..24).map(|v| v as f64).collect::<Vec<_>>())
}

#[test]
fn sums_over_several_axes_sets() {
    let x = arange3();
    assert_value(&perf1(&red(ReduceOp::Sum, None), &[&x]), F64, &[], &[276.0]);
    assert_value(
        &perf1(&red(ReduceOp::Sum, Some(&[0, 1, 2])), &[&x]),
        F64,
        &[],
        &[276.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::Sum, Some(&[0])), &[&x]),
        F64,
        &[3, 4],
        &[
            12.0, 14.0, 16.0, 18.0, 20.0, 22.0, 24.0, 26.0, 28.0, 30.0, 32.0, 34.0,
        ],
    );
    assert_value(
        &perf1(&red(ReduceOp::Sum, Some(&[1])), &[&x]),
        F64,
        &[2, 4],
        &[12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::Sum, Some(&[2])), &[&x]),
        F64,
        &[2, 3],
        &[6.0, 22.0, 38.0, 54.0, 70.0, 86.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::Sum, Some(&[0, 2])), &[&x]),
        F64,
        &[3],
        &[60.0, 92.0, 124.0],
    );
    assert!(perf1(&red(ReduceOp::Sum, Some(&[])), &[&x]).same_as(&x));
}

#[test]
fn prod_max_min_all_any() {
    let x = arange3();
    assert_value(
        &perf1(&red(ReduceOp::Prod, Some(&[0])), &[&x]),
        F64,
        &[3, 4],
        &[
            0.0, 13.0, 28.0, 45.0, 64.0, 85.0, 108.0, 133.0, 160.0, 189.0, 220.0, 253.0,
        ],
    );
    assert_value(
        &perf1(&red(ReduceOp::Max, Some(&[1])), &[&x]),
        F64,
        &[2, 4],
        &[8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::Min, Some(&[0, 2])), &[&x]),
        F64,
        &[3],
        &[0.0, 4.0, 8.0],
    );
    let multiple_of_5 = ew(
        Eq,
        &[
            &ew(Mod, &[&x, &f64s(&[1, 1, 1], &[5.0])]),
            &f64s(&[1, 1, 1], &[0.0]),
        ],
    );
    assert_eq!(multiple_of_5.dtype(), Bool);
    assert_value(
        &perf1(&red(ReduceOp::Any, Some(&[2])), &[&multiple_of_5]),
        Bool,
        &[2, 3],
        &[1.0, 1.0, 1.0, 1.0, 0.0, 1.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::All, Some(&[0])), &[&multiple_of_5]),
        Bool,
        &[3, 4],
        &[0.0; 12],
    );
    let positive = ew(Gt, &[&x, &f64s(&[1, 1, 1], &[0.0])]);
    assert_value(
        &perf1(&red(ReduceOp::All, Some(&[1])), &[&positive]),
        Bool,
        &[2, 4],
        &[0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    );
    // All / Any of numbers test nonzero; NaN is true.
    assert_value(
        &perf1(&red(ReduceOp::All, None), &[&vf(&[NAN, 2.0])]),
        Bool,
        &[],
        &[1.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::Any, None), &[&vi(&[0, 0, 3])]),
        Bool,
        &[],
        &[1.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::All, None), &[&vi(&[0, 1])]),
        Bool,
        &[],
        &[0.0],
    );
}

#[test]
fn reductions_propagate_nan_and_infinities() {
    let x = f64s(&[2, 3], &[1.0, NAN, 3.0, -INF, 0.0, INF]);
    assert_value(
        &perf1(&red(ReduceOp::Max, Some(&[1])), &[&x]),
        F64,
        &[2],
        &[NAN, INF],
    );
    assert_value(
        &perf1(&red(ReduceOp::Min, Some(&[1])), &[&x]),
        F64,
        &[2],
        &[NAN, -INF],
    );
    assert_value(
        &perf1(&red(ReduceOp::Sum, Some(&[1])), &[&x]),
        F64,
        &[2],
        &[NAN, NAN],
    );
    assert_value(
        &perf1(&red(ReduceOp::Max, Some(&[0])), &[&x]),
        F64,
        &[3],
        &[1.0, NAN, INF],
    );
    assert_value(
        &perf1(&red(ReduceOp::Prod, Some(&[0])), &[&x]),
        F64,
        &[3],
        &[-INF, NAN, INF],
    );
}

#[test]
fn integer_reductions_accumulate_in_i64_and_keep_dtype_for_max_min() {
    let x = val(&[2, 2], vec![100i8, 100, -128, 127]);
    assert_value(&perf1(&red(ReduceOp::Sum, None), &[&x]), I64, &[], &[199.0]);
    assert_value(
        &perf1(&red(ReduceOp::Sum, Some(&[0])), &[&x]),
        I64,
        &[2],
        &[-28.0, 227.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::Prod, Some(&[1])), &[&x]),
        I64,
        &[2],
        &[10000.0, -16256.0],
    );
    assert_value(
        &perf1(&red(ReduceOp::Max, Some(&[0])), &[&x]),
        I8,
        &[2],
        &[100.0, 127.0],
    );
    assert_value(&perf1(&red(ReduceOp::Min, None), &[&x]), I8, &[], &[-128.0]);
    // An unsigned sum accumulates in u64, as numpy's (`np.uint8` sums give `uint64`).
    let u = val(&[2], vec![200u8, 200]);
    assert_value(&perf1(&red(ReduceOp::Sum, None), &[&u]), U64, &[], &[400.0]);
    let b = val(&[3], vec![true, true, false]);
    assert_value(&perf1(&red(ReduceOp::Sum, None), &[&b]), I64, &[], &[2.0]);
    assert_value(&perf1(&red(ReduceOp::Max, None), &[&b]), Bool, &[], &[1.0]);
    // i64 sums wrap.
    assert_eq!(
        flat_i(&perf1(&red(ReduceOp::Sum, None), &[&vi(&[i64::MAX, 1])])),
        [i64::MIN]
    );
    // f32 sums round to f32.
    let f = val(&[3], vec![0.1f32, 0.2, 0.3]);
    let s = perf1(&red(ReduceOp::Sum, None), &[&f]);
    assert_eq!(s.dtype(), F32);
    assert_eq!(
        flat(&s),
        [((0.1f32 as f64 + 0.2f32 as f64) + 0.3f32 as f64) as f32 as f64]
    );
}

#[test]
fn empty_and_zero_d_reductions() {
    let e = f64s(&[0, 3], &[]);
    assert_value(
        &perf1(&red(ReduceOp::Sum, Some(&[0])), &[&e]),
        F64,
        &[3],
        &[0.0; 3],
    );
    assert_value(&perf1(&red(ReduceOp::Prod, None), &[&e]), F64, &[], &[1.0]);
    assert_value(&perf1(&red(ReduceOp::All, None), &[&e]), Bool, &[], &[1.0]);
    assert_value(
        &perf1(&red(ReduceOp::Any, Some(&[0])), &[&e]),
        Bool,
        &[3],
        &[0.0; 3],
    );
    // Reducing the non-empty axis of an empty array is fine for max too.
    assert_value(
        &perf1(&red(ReduceOp::Max, Some(&[1])), &[&e]),
        F64,
        &[0],
        &[],
    );
    for (op, name) in [(ReduceOp::Max, "Max"), (ReduceOp::Min, "Min")] {
        let err = perf(&red(op, Some(&[0])), &[&e]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("evaluation error in {name}{{axes=[0]}}: zero-size reduction along axis 0: {} has no identity", name.to_lowercase())
        );
    }
    let ei = val(&[2, 0], Vec::<i32>::new());
    assert_eq!(
        perf(&red(ReduceOp::Max, None), &[&ei])
            .unwrap_err()
            .to_string(),
        "evaluation error in Max{axes=None}: zero-size reduction along axis 1: max has no identity"
    );
    let s = Value::scalar_f64(F64, 3.5);
    assert_value(&perf1(&red(ReduceOp::Sum, None), &[&s]), F64, &[], &[3.5]);
    assert_value(&perf1(&red(ReduceOp::Max, None), &[&s]), F64, &[], &[3.5]);
}

// ----- Dot -----------------------------------------------------------------------

#[test]
fn dot_in_all_one_and_two_d_combinations() {
    let a = val(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]);
    let b = val(&[3, 2], vec![1i64, 0, 0, 1, 2, -1]);
    let v = vi(&[1, 0, -1]);
    assert_value(
        &perf1(&Op::Dot, &[&a, &b]),
        I64,
        &[2, 2],
        &[7.0, -1.0, 16.0, -1.0],
    );
    assert_value(&perf1(&Op::Dot, &[&a, &v]), I64, &[2], &[-2.0, -2.0]);
    assert_value(
        &perf1(&Op::Dot, &[&vi(&[1, 2, 3]), &b]),
        I64,
        &[2],
        &[7.0, -1.0],
    );
    assert_value(
        &perf1(&Op::Dot, &[&vf(&[1.0, 2.0, 3.0]), &vf(&[4.0, 5.0, 6.0])]),
        F64,
        &[],
        &[32.0],
    );
    // Mixed dtypes upcast; f32 rounds.
    let f = val(&[3], vec![0.1f32, 0.2, 0.3]);
    let d = perf1(&Op::Dot, &[&f, &val(&[3], vec![1i8, 1, 1])]);
    assert_eq!(d.dtype(), F32);
    assert_eq!(
        flat(&d),
        [((0.1f32 as f64 + 0.2f32 as f64) + 0.3f32 as f64) as f32 as f64]
    );
    // Narrow integers wrap like numpy: 100*2 + 100*1 = 300 -> 44.
    assert_value(
        &perf1(
            &Op::Dot,
            &[&val(&[2], vec![100i8, 100]), &val(&[2], vec![2i8, 1])],
        ),
        I8,
        &[],
        &[44.0],
    );
    assert_value(
        &perf1(
            &Op::Dot,
            &[&val(&[2], vec![true, true]), &val(&[2], vec![true, true])],
        ),
        I64,
        &[],
        &[2.0],
    );
    // Empty inner dimension gives zeros; empty outer dimensions give empty results.
    assert_value(
        &perf1(&Op::Dot, &[&f64s(&[2, 0], &[]), &f64s(&[0, 3], &[])]),
        F64,
        &[2, 3],
        &[0.0; 6],
    );
    assert_value(
        &perf1(&Op::Dot, &[&f64s(&[0, 2], &[]), &vf(&[1.0, 2.0])]),
        F64,
        &[0],
        &[],
    );
    assert_value(&perf1(&Op::Dot, &[&vf(&[]), &vf(&[])]), F64, &[], &[0.0]);
    // NaN and infinities propagate.
    assert_value(
        &perf1(&Op::Dot, &[&vf(&[INF, 1.0]), &vf(&[0.0, 1.0])]),
        F64,
        &[],
        &[NAN],
    );
}

#[test]
fn dot_misaligned_at_run_time() {
    let e = perform(
        &Op::Dot,
        &[&f64s(&[2, 3], &[0.0; 6]), &vf(&[1.0; 4])],
        &[&TensorType::unknown(F64, 2), &TensorType::unknown(F64, 1)],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in dot: shapes [2, 3] and [4] are not aligned: 3 (dim 1) != 4 (dim 0)"
    );
}

// ----- Alloc, Reshape, Shape, Shape_i ---------------------------------------------

#[test]
fn alloc_broadcasts_values() {
    let two = Value::scalar_i64(I64, 2);
    let three = Value::scalar_i64(I32, 3);
    assert_value(
        &perf1(&Op::Alloc, &[&Value::scalar_f64(F32, 1.5), &two, &three]),
        F32,
        &[2, 3],
        &[1.5; 6],
    );
    let row = vf(&[1.0, 2.0, 3.0]);
    assert_value(
        &perf1(&Op::Alloc, &[&row, &two, &three]),
        F64,
        &[2, 3],
        &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
    );
    let col = val(&[2, 1], vec![1u8, 2]);
    assert_value(
        &perf1(&Op::Alloc, &[&col, &two, &three]),
        U8,
        &[2, 3],
        &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
    );
    let zero = Value::scalar_i64(I64, 0);
    assert_value(
        &perf1(&Op::Alloc, &[&Value::scalar_f64(F64, 7.0), &zero, &three]),
        F64,
        &[0, 3],
        &[],
    );
    assert_value(
        &perf1(&Op::Alloc, &[&Value::scalar_f64(F64, 7.0)]),
        F64,
        &[],
        &[7.0],
    );
    let e = perf(&Op::Alloc, &[&row, &Value::scalar_i64(I64, -1)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in Alloc: negative size -1 for dimension 0"
    );
    let e = perf(&Op::Alloc, &[&row, &two, &two]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in Alloc: value of shape [3] cannot broadcast to [2, 2]"
    );
    let big = Value::scalar_i64(I64, 1 << 40);
    let e = perf(&Op::Alloc, &[&row, &big, &big, &three]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "evaluation error in Alloc: shape [1099511627776, 1099511627776, 3] is too large to allocate"
    );
}

fn reshape(x: &Value, target: &[i64]) -> Result<Value> {
    let s = vi(target);
    let types = [TensorType::unknown(x.dtype(), x.ndim()), s.tensor_type()];
    perform(
        &Op::Reshape { ndim: target.len() },
        &[x, &s],
        &[&types[0], &types[1]],
    )
    .map(|mut v| v.remove(0))
}

#[test]
fn reshape_with_minus_one_and_errors() {
    let x = arange3();
    let r = reshape(&x, &[6, -1]).unwrap();
    assert_eq!(r.shape(), [6, 4]);
    assert_eq!(flat(&r), flat(&x));
    assert_eq!(reshape(&x, &[-1]).unwrap().shape(), [24]);
    assert_eq!(reshape(&x, &[4, 3, 2]).unwrap().shape(), [4, 3, 2]);
    assert_eq!(
        reshape(&f64s(&[1, 1], &[5.0]), &[]).unwrap().shape(),
        [] as [usize; 0]
    );
    assert_eq!(
        reshape(&f64s(&[0, 3], &[]), &[3, 0]).unwrap().shape(),
        [3, 0]
    );
    // A transposed (non-standard layout) input reshapes in logical order.
    let t = perf1(
        &Op::DimShuffle {
            input_ndim: 2,
            new_order: vec![Some(1), Some(0)],
        },
        &[&f64s(&[2, 2], &[1.0, 2.0, 3.0, 4.0])],
    );
    assert_eq!(flat(&reshape(&t, &[-1]).unwrap()), [1.0, 3.0, 2.0, 4.0]);
    let msg = |t: &[i64]| reshape(&x, t).unwrap_err().to_string();
    assert_eq!(
        msg(&[5, -1]),
        "evaluation error in Reshape{2}: cannot reshape size 24 into [5, -1]"
    );
    assert_eq!(
        msg(&[5, 5]),
        "evaluation error in Reshape{2}: cannot reshape array of shape [2, 3, 4] into [5, 5]"
    );
    assert_eq!(
        msg(&[-1, -1]),
        "evaluation error in Reshape{2}: cannot reshape array of shape [2, 3, 4] into [-1, -1]"
    );
    assert_eq!(
        msg(&[-3, 8]),
        "evaluation error in Reshape{2}: invalid size -3 in [-3, 8]"
    );
    assert_eq!(
        reshape(&f64s(&[0, 3], &[]), &[0, -1])
            .unwrap_err()
            .to_string(),
        "evaluation error in Reshape{2}: cannot reshape size 0 into [0, -1]"
    );
}

#[test]
fn shape_and_shape_i() {
    let x = f64s(&[2, 0, 3], &[]);
    assert_value(&perf1(&Op::Shape, &[&x]), I64, &[3], &[2.0, 0.0, 3.0]);
    assert_value(
        &perf1(&Op::Shape, &[&Value::scalar_f64(F64, 1.0)]),
        I64,
        &[0],
        &[],
    );
    assert_value(&perf1(&Op::ShapeI(2), &[&x]), I64, &[], &[3.0]);
    assert_value(&perf1(&Op::ShapeI(1), &[&x]), I64, &[], &[0.0]);
}

// ----- evaluation of whole graphs and input checking ---------------------------------

#[test]
fn evaluate_checks_inputs_with_clear_messages() {
    let x = tensor("x", F32, &[None, Some(3)]);
    let y = scalar("y", F32);
    let fg = FunctionGraph::new(&[x.clone(), y.clone()], &[&x * &y]).unwrap();
    let good = val(&[2, 3], vec![1.0f32; 6]);
    let y0 = Value::scalar_f64(F32, 2.0);
    assert_value(
        &evaluate(&fg, &[good.clone(), y0.clone()]).unwrap()[0],
        F32,
        &[2, 3],
        &[2.0; 6],
    );
    let msg = |vals: &[Value]| evaluate(&fg, vals).unwrap_err().to_string();
    assert_eq!(
        msg(std::slice::from_ref(&good)),
        "input error: expected 2 inputs, got 1"
    );
    assert_eq!(
        msg(&[f64s(&[2, 3], &[0.0; 6]), y0.clone()]),
        "input error: input 0 ('x') has dtype f64, expected f32"
    );
    assert_eq!(
        msg(&[val(&[6], vec![1.0f32; 6]), y0.clone()]),
        "input error: input 0 ('x') has 1 dimension(s) (shape [6]), expected 2 (type f32(?, 3))"
    );
    assert_eq!(
        msg(&[val(&[3, 2], vec![1.0f32; 6]), y0]),
        "input error: input 0 ('x') has size 2 in dimension 1, but its type f32(?, 3) requires 3"
    );
    let ty = TensorType::scalar(I8);
    assert_eq!(check_input(4, None, &ty, I8, &[]), Ok(()));
    assert_eq!(
        check_input(4, None, &ty, U8, &[]).unwrap_err().to_string(),
        "input error: input 4 has dtype u8, expected i8"
    );
}

#[test]
fn evaluate_constant_and_input_outputs() {
    let x = vector("x", I32);
    let c = constant(ndarray::arr1(&[1.5, 2.5]).into_dyn());
    let fg = FunctionGraph::new(std::slice::from_ref(&x), &[x.clone(), c.clone(), &x + 1]).unwrap();
    let outs = evaluate(&fg, &[val(&[2], vec![4i32, 5])]).unwrap();
    assert_value(&outs[0], I32, &[2], &[4.0, 5.0]);
    assert_value(&outs[1], F64, &[2], &[1.5, 2.5]);
    assert_value(&outs[2], I32, &[2], &[5.0, 6.0]);
}
