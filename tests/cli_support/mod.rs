//! Helpers of the `kiln` command-line tests: the binary and .npy files.
#![allow(dead_code)] // each test file uses a subset

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ndarray::ArrayD;
use ndarray_npy::{ReadNpyExt, WriteNpyExt};

/// The `kiln` binary built for these tests.
pub fn kiln() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
}

/// Writes `a` as `dir/name.npy` and returns the path.
pub fn save<T>(dir: &Path, name: &str, a: &ArrayD<T>) -> PathBuf
where
    ArrayD<T>: WriteNpyExt,
{
    let p = dir.join(format!("{name}.npy"));
    let f = std::fs::File::create(&p).unwrap();
    a.write_npy(f).unwrap();
    p
}

/// Reads an `.npy` of element type `T`.
pub fn load<T>(p: &Path) -> ArrayD<T>
where
    ArrayD<T>: ReadNpyExt,
{
    ArrayD::<T>::read_npy(std::fs::File::open(p).unwrap()).unwrap()
}

/// `--in name=path`.
pub fn input(name: &str, p: &Path) -> String {
    format!("{name}={}", p.display())
}

/// The stdout of a successful run.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).unwrap()
}
