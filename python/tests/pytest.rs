//! Builds the Python package and runs its pytest suite (`python/tests/*.py`)
//! from `cargo test`, so the README's single test command covers Python too.
//!
//! Steps: a virtual environment under the workspace's `target/python-venv`
//! (created once, with `python3 -m venv`), the packages of
//! `tests/requirements.txt` installed from PyPI (again only when that file
//! changes), the extension built and installed into it with
//! `maturin develop --release`, then `python -m pytest`. Every failure —
//! no Python, no network, a build error, a failing Python test — fails this
//! test with the failing command's output; nothing is skipped.
//! `KILN_PYTHON` names another interpreter than `python3`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `cmd`, failing the test with its output unless it succeeds.
fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}): {cmd:?}\n{text}",
        out.status
    );
    text
}

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => python_dir().join("..").join("target"),
    }
}

/// The virtual environment's interpreter, creating the environment and
/// installing the test requirements when needed.
fn venv_python(venv: &Path) -> PathBuf {
    let bin = if cfg!(windows) { "Scripts" } else { "bin" };
    let python = venv.join(bin).join(if cfg!(windows) {
        "python.exe"
    } else {
        "python"
    });
    if !python.exists() {
        let base = std::env::var("KILN_PYTHON").unwrap_or_else(|_| "python3".into());
        run(
            Command::new(&base).args(["-m", "venv"]).arg(venv),
            "creating the virtual environment (is Python 3 installed?)",
        );
    }
    let requirements = python_dir().join("tests").join("requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).expect("tests/requirements.txt");
    let stamp = venv.join("kiln-requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        run(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "-q",
                    "-r",
                ])
                .arg(&requirements),
            "installing the test requirements from PyPI (is the registry reachable?)",
        );
        std::fs::write(&stamp, wanted).expect("writing the requirements stamp");
    }
    python
}

#[test]
fn python_package_builds_and_its_pytest_suite_passes() {
    let venv = target_dir().join("python-venv");
    let python = venv_python(&venv);
    let bin = python.parent().expect("the venv's bin directory");
    run(
        Command::new(bin.join("maturin"))
            .args(["develop", "--release", "--quiet", "--manifest-path"])
            .arg(python_dir().join("Cargo.toml"))
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", path_with(bin)),
        "building the extension module (maturin develop)",
    );
    let report = run(
        Command::new(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(python_dir().join("tests"))
            .current_dir(python_dir()),
        "the pytest suite",
    );
    eprintln!("{report}");
}

/// `PATH` with `dir` first (so maturin finds the venv's interpreter).
fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut dirs = vec![dir.to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).expect("PATH entries")
}
