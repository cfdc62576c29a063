//! Branch-free scalar building blocks shared by every math kernel: rounding
//! with the 1.5·2^52 trick, exact power-of-two scaling, error-free
//! transformations (fma-exact products, Knuth sums) and Horner evaluation.
//!
//! Everything here is exact (error-free transformations, scaling by powers of
//! two away from the subnormal range) or documented at the item. All helpers
//! are `#[inline(always)]` and use only operations that SSE2 / AVX2 / AVX-512
//! vectorise (no float <-> i64 conversions, no calls into the C library), so a
//! loop over a slice of kernel calls auto-vectorises.

/// 1.5 · 2^52: adding it rounds any |x| < 2^51 to the nearest integer and
/// leaves that integer in the low mantissa bits.
pub(crate) const MAGIC: f64 = 6_755_399_441_055_744.0;

/// ln 2 split so that `k * LN2_HI` is exact for |k| < 2^21.
pub(crate) const LN2_HI: f64 = 0.693_147_180_601_954_5;
/// ln 2 - LN2_HI.
pub(crate) const LN2_LO: f64 = -4.200_915_072_681_084_6e-11;

/// Rounds `x` (|x| < 2^51) to the nearest integer, ties to even: returns
/// the integer as f64 and as i64.
#[inline(always)]
pub(crate) fn round_k(x: f64) -> (f64, i64) {
    let t = x + MAGIC;
    let kf = t - MAGIC;
    let k = (t.to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64);
    (kf, k)
}

/// Rounds the exact product `x·c` (|x·c| < 2^51) to the nearest integer,
/// ties to even, with one FMA (no rounding of the product first): returns
/// the integer as f64 and as i64.
#[inline(always)]
pub(crate) fn round_prod(x: f64, c: f64) -> (f64, i64) {
    let t = x.mul_add(c, MAGIC);
    let kf = t - MAGIC;
    let k = (t.to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64);
    (kf, k)
}

/// Rounds the exact product `x·c` (0 <= x·c < 1024) to the nearest
/// integer k with one FMA, as [`round_prod`], and returns k as f64 and
/// 2^k: the FMA adds the magic constant plus the exponent bias 1023, so
/// the low bits of the sum are k + 1023 and shifting them into the
/// exponent field is all [`pow2i`]'s work (one vector operation less
/// per use than `pow2i(round_prod(..).1)`). Ties go to the even k + 1023,
/// i.e. to the odd k (a reduction only needs k and 2^k to agree).
#[inline(always)]
pub(crate) fn round_prod_pow2(x: f64, c: f64) -> (f64, f64) {
    const BIASED: f64 = MAGIC + 1023.0;
    let t = x.mul_add(c, BIASED);
    (t - BIASED, f64::from_bits(t.to_bits() << 52))
}

/// 2^k for k in [-1022, 1023], built from bits.
#[inline(always)]
pub(crate) fn pow2i(k: i64) -> f64 {
    f64::from_bits((k.wrapping_add(1023) as u64) << 52)
}

/// p · 2^k for k in [-2044, 2046] with a single rounding (the first product
/// stays in the normal range and is exact): overflows to inf and underflows
/// through the subnormals to 0 exactly like a correctly rounded ldexp.
#[inline(always)]
pub(crate) fn scale(p: f64, k: i64) -> f64 {
    let k1 = k >> 1;
    let k2 = k - k1;
    p * pow2i(k1) * pow2i(k2)
}

/// Branch-free select (compiles to a blend), for f64, f32 and integer
/// lanes alike.
#[inline(always)]
pub(crate) fn sel<T>(c: bool, a: T, b: T) -> T {
    if c {
        a
    } else {
        b
    }
}

/// The sign bit of an f64.
pub(crate) const SIGN_BIT: u64 = 1 << 63;

/// |x| with the sign bit of `s`.
#[inline(always)]
pub(crate) fn copysign(x: f64, s: f64) -> f64 {
    f64::from_bits((x.to_bits() & !SIGN_BIT) | (s.to_bits() & SIGN_BIT))
}

/// Clamps `x` to [lo, hi] keeping NaN (comparisons with NaN are false).
#[inline(always)]
pub(crate) fn clamp_keep_nan(x: f64, lo: f64, hi: f64) -> f64 {
    let y = sel(x > hi, hi, x);
    sel(y < lo, lo, y)
}

/// The exact product: a·b = p + e (p the rounded product, e its rounding
/// error from one fused multiply-add: a `vfmadd` in the AVX2 / AVX-512
/// variants, the correctly rounded software fma in the baseline one, so
/// every variant gives the same bits). Exact unless a·b underflows.
/// Dekker's split-based form took 17 operations instead of 2 (pow's
/// kernel spent most of its time in them).
#[inline(always)]
pub(crate) fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    (p, a.mul_add(b, -p))
}

/// Knuth's sum: a + b = s + e exactly.
#[inline(always)]
pub(crate) fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// Fast two-sum for |a| >= |b|: a + b = s + e exactly.
#[inline(always)]
pub(crate) fn fast_two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    (s, b - (s - a))
}

/// The fused multiply-add of both float widths, for [`horner`].
pub(crate) trait MulAdd: Copy {
    /// self·a + b with one rounding.
    fn fma(self, a: Self, b: Self) -> Self;
}

impl MulAdd for f64 {
    #[inline(always)]
    fn fma(self, a: f64, b: f64) -> f64 {
        self.mul_add(a, b)
    }
}

impl MulAdd for f32 {
    #[inline(always)]
    fn fma(self, a: f32, b: f32) -> f32 {
        self.mul_add(a, b)
    }
}

/// Horner evaluation c[0] + x·(c[1] + x·(...)), each step one fused
/// multiply-add (`mul_add`: a `vfmadd` in the AVX2 / AVX-512 variants, a
/// correctly rounded software fma in the baseline one, so every variant
/// gives the same bits; the baseline variant is slower for it), in f64 or
/// f32.
#[inline(always)]
pub(crate) fn horner<T: MulAdd, const N: usize>(x: T, c: &[T; N]) -> T {
    let mut acc = c[N - 1];
    let mut i = N - 1;
    while i > 0 {
        i -= 1;
        acc = acc.fma(x, c[i]);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_and_scale() {
        assert_eq!(round_k(2.5), (2.0, 2));
        assert_eq!(round_k(-3.6), (-4.0, -4));
        assert_eq!(scale(1.0, -1074), f64::from_bits(1));
        assert_eq!(scale(1.5, 1023), 1.5 * 2f64.powi(1023));
        assert_eq!(scale(1.0, 1024), f64::INFINITY);
        assert_eq!(scale(1.0, -1080), 0.0);
    }

    #[test]
    fn rounded_product_and_its_power_of_two() {
        // k from 0 to 1023 (the documented range), ties to even, and the
        // product rounded once (not x·c first): 2^k bit-exact.
        for k in 0..1024 {
            let x = f64::from(k) / std::f64::consts::LN_2;
            let (kf, p) = round_prod_pow2(x, std::f64::consts::LN_2);
            assert_eq!((kf, p), (f64::from(k), 2f64.powi(k)), "k = {k}");
        }
        // Ties go to the even k + 1023, so to the odd k: a reduction only
        // needs kf and 2^k to agree, which they do.
        assert_eq!(round_prod_pow2(2.5, 1.0), (3.0, 8.0));
        assert_eq!(round_prod_pow2(3.5, 1.0), (3.0, 8.0));
        assert_eq!(round_prod_pow2(0.0, 1.0), (0.0, 1.0));
        let (kf, _) = round_prod(0.7, 2.0);
        assert_eq!(round_prod_pow2(0.7, 2.0).0, kf);
    }

    #[test]
    fn error_free_transforms() {
        let (p, e) = two_prod(0.1, 0.3);
        assert_eq!(p, 0.1 * 0.3);
        assert!(e != 0.0 && e.abs() < 1e-17);
        let (s, e) = two_sum(1.0, 1e-20);
        assert_eq!((s, e), (1.0, 1e-20));
    }
}
