//! Operator sugar over the builder functions. The operators panic on a type
//! error (like ndarray's do on shape errors); use the functions in
//! `tensor::build` (`add`, `mul`, ...) to get a `Result` instead.

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use super::build::{self, weak_constant, weak_int_constant};
use super::Tensor;

macro_rules! overload {
    ($trait:ident, $method:ident, $f:path) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                $f(self, rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                $f(&self, &rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                $f(&self, rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                $f(self, &rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        overload!(@num $trait, $method, $f, f64, |like: &Tensor, v: f64| weak_constant(like, v, true));
        overload!(@num $trait, $method, $f, i64, weak_int_constant);
    };
    (@num $trait:ident, $method:ident, $f:path, $t:ty, $weak:expr) => {
        impl $trait<$t> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: $t) -> Tensor {
                let c = ($weak)(self, rhs).unwrap_or_else(|e| panic!("{e}"));
                $f(self, &c).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        impl $trait<$t> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: $t) -> Tensor {
                (&self).$method(rhs)
            }
        }
        impl $trait<&Tensor> for $t {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                let c = ($weak)(rhs, self).unwrap_or_else(|e| panic!("{e}"));
                $f(&c, rhs).unwrap_or_else(|e| panic!("{e}"))
            }
        }
        impl $trait<Tensor> for $t {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                self.$method(&rhs)
            }
        }
    };
}

overload!(Add, add, build::add);
overload!(Sub, sub, build::sub);
overload!(Mul, mul, build::mul);
overload!(Div, div, build::true_div);
overload!(Rem, rem, build::modulo);

impl Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
