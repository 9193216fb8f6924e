//! Where the emulated ConnectX's libraries are, for the test binaries that run programs on
//! it: `$IBGDA_EMU_LIB_DIR`, else `<target>/emu/lib` (`scripts/build-emulated-nic` builds
//! them there), found from the test binary's own path (`<target>/release/deps/<test>`).

use std::path::{Path, PathBuf};

/// The directory holding the emulated `libibverbs.so.1`, if it is built.
pub fn emulator_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("IBGDA_EMU_LIB_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().ok()?;
            exe.parent()?.parent()?.parent()?.join("emu/lib")
        }
    };
    dir.join("libibverbs.so.1").is_file().then_some(dir)
}

/// `LD_LIBRARY_PATH` with `dir` first.
pub fn library_path(dir: &Path) -> std::ffi::OsString {
    let mut path = dir.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    path
}
