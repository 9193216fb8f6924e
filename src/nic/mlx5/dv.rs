//! The rdma-core libraries, loaded at run time.
//!
//! Verbs come from `rdma-mummy-sys`, whose shim `dlopen`s `libibverbs.so.1` when the
//! program starts (a missing library makes every verb fail with `EOPNOTSUPP`, which cannot
//! be told apart from a real `EOPNOTSUPP`). So the backend first loads both libraries
//! itself, turning a missing one into [`Mlx5Error::LibraryMissing`] (one that does not fit
//! the libraries loaded before it into [`Mlx5Error::LibraryMismatch`]), and looks up the
//! mlx5dv/DEVX entry points `rdma-mummy-sys` does not bind in `libmlx5.so.1`; each missing
//! one is [`Mlx5Error::Unsupported`] when (and only when) it is needed.

use core::ffi::{c_int, c_void};
use std::sync::OnceLock;

use libloading::Library;
use rdma_mummy_sys::{
    ibv_context, ibv_device, mlx5dv_context_attr, mlx5dv_devx_obj, mlx5dv_devx_uar,
    mlx5dv_devx_umem, mlx5dv_devx_umem_in, mlx5dv_obj,
};

use super::error::Mlx5Error;

/// The verbs library.
pub const IBVERBS: &str = "libibverbs.so.1";
/// The mlx5 provider library (mlx5dv and DEVX).
pub const MLX5: &str = "libmlx5.so.1";

pub(crate) type OpenDevice =
    unsafe extern "C" fn(*mut ibv_device, *mut mlx5dv_context_attr) -> *mut ibv_context;
pub(crate) type IsSupported = unsafe extern "C" fn(*mut ibv_device) -> bool;
pub(crate) type InitObj = unsafe extern "C" fn(*mut mlx5dv_obj, u64) -> c_int;
pub(crate) type ObjCreate = unsafe extern "C" fn(
    *mut ibv_context,
    *const c_void,
    usize,
    *mut c_void,
    usize,
) -> *mut mlx5dv_devx_obj;
pub(crate) type ObjCommand =
    unsafe extern "C" fn(*mut mlx5dv_devx_obj, *const c_void, usize, *mut c_void, usize) -> c_int;
pub(crate) type ObjDestroy = unsafe extern "C" fn(*mut mlx5dv_devx_obj) -> c_int;
pub(crate) type GeneralCmd =
    unsafe extern "C" fn(*mut ibv_context, *const c_void, usize, *mut c_void, usize) -> c_int;
pub(crate) type UmemReg =
    unsafe extern "C" fn(*mut ibv_context, *mut c_void, usize, u32) -> *mut mlx5dv_devx_umem;
pub(crate) type UmemRegEx =
    unsafe extern "C" fn(*mut ibv_context, *mut mlx5dv_devx_umem_in) -> *mut mlx5dv_devx_umem;
pub(crate) type UmemDereg = unsafe extern "C" fn(*mut mlx5dv_devx_umem) -> c_int;
pub(crate) type AllocUar = unsafe extern "C" fn(*mut ibv_context, u32) -> *mut mlx5dv_devx_uar;
pub(crate) type FreeUar = unsafe extern "C" fn(*mut mlx5dv_devx_uar);
pub(crate) type QueryEqn = unsafe extern "C" fn(*mut ibv_context, u32, *mut u32) -> c_int;
/// The emulated ConnectX's `ibgda_emu_uar_page` (in its `libibverbs.so.1`; absent from
/// rdma-core's): 1 when the address lies in one of its UAR pages (ordinary memory), 0 when
/// not, minus a CUDA error code when that page's GPU mapping is configured to fail.
pub(crate) type EmuUarPage = unsafe extern "C" fn(*const c_void) -> c_int;

/// An entry point: its name and, if the library has it, its address.
#[derive(Clone, Copy)]
pub(crate) struct Entry<F> {
    symbol: &'static str,
    function: Option<F>,
}

impl<F: Copy> Entry<F> {
    /// The function, or [`Mlx5Error::Unsupported`] naming it.
    pub(crate) fn get(&self) -> Result<F, Mlx5Error> {
        self.function.ok_or(Mlx5Error::Unsupported {
            symbol: self.symbol,
            library: MLX5,
        })
    }
    /// Whether the library has it.
    pub(crate) fn present(&self) -> bool {
        self.function.is_some()
    }
}

/// The loaded libraries and the mlx5dv entry points (each possibly missing).
pub(crate) struct Libraries {
    pub(crate) open_device: Entry<OpenDevice>,
    pub(crate) is_supported: Entry<IsSupported>,
    pub(crate) init_obj: Entry<InitObj>,
    pub(crate) obj_create: Entry<ObjCreate>,
    pub(crate) obj_modify: Entry<ObjCommand>,
    pub(crate) obj_query: Entry<ObjCommand>,
    pub(crate) obj_destroy: Entry<ObjDestroy>,
    pub(crate) general_cmd: Entry<GeneralCmd>,
    pub(crate) umem_reg: Entry<UmemReg>,
    pub(crate) umem_reg_ex: Entry<UmemRegEx>,
    pub(crate) umem_dereg: Entry<UmemDereg>,
    pub(crate) alloc_uar: Entry<AllocUar>,
    pub(crate) free_uar: Entry<FreeUar>,
    pub(crate) query_eqn: Entry<QueryEqn>,
    /// Present only in the emulated ConnectX (not counted as missing).
    pub(crate) emu_uar_page: Entry<EmuUarPage>,
    // Kept loaded for the life of the process: the function pointers above point into it.
    _mlx5: Library,
    _ibverbs: Library,
}

impl std::fmt::Debug for Libraries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Libraries")
            .field("missing", &self.missing())
            .finish()
    }
}

/// Looks `symbol` up in `lib`.
///
/// # Safety
///
/// `F` must be the C signature of `symbol` in the library.
unsafe fn entry<F: Copy>(lib: &Library, symbol: &'static str) -> Entry<F> {
    let mut name = Vec::with_capacity(symbol.len() + 1);
    name.extend_from_slice(symbol.as_bytes());
    name.push(0);
    // SAFETY: the caller guarantees `F` is the symbol's type; the pointer is only called
    // while the library stays loaded (`Libraries` owns it and lives for the process).
    let function = unsafe { lib.get::<F>(name.as_slice()) }.ok().map(|s| *s);
    Entry { symbol, function }
}

fn open(library: &'static str) -> Result<Library, Mlx5Error> {
    // SAFETY: loading rdma-core's libraries runs their initialisers, which have no
    // preconditions (they only register providers and read the environment).
    unsafe { Library::new(library) }.map_err(|e| {
        let reason = loader_message(&e);
        // glibc's words for a library found whose symbols the loaded ones cannot satisfy.
        if reason.contains("undefined symbol") || reason.contains("not found (required by") {
            Mlx5Error::LibraryMismatch { library, reason }
        } else {
            Mlx5Error::LibraryMissing { library, reason }
        }
    })
}

/// What the loader said (`dlerror`): libloading's error displays only "dlopen failed" and
/// keeps the loader's text as its source, which tells a library that is absent ("cannot
/// open shared object file") from one that does not fit the libraries loaded before it
/// ("undefined symbol: ..., version IBVERBS_PRIVATE_34").
fn loader_message(e: &libloading::Error) -> String {
    use std::error::Error as _;
    e.source()
        .map_or_else(|| e.to_string(), |source| source.to_string())
}

impl Libraries {
    /// Loads `ibverbs` and `mlx5` (file names searched as `dlopen` does) and looks up the
    /// entry points in the latter.
    pub(crate) fn load_from(ibverbs: &'static str, mlx5: &'static str) -> Result<Self, Mlx5Error> {
        let ibverbs_lib = open(ibverbs)?;
        let mlx5_lib = open(mlx5)?;
        // SAFETY (every `entry` below): each type alias is the entry point's prototype in
        // rdma-core's <infiniband/mlx5dv.h>.
        unsafe {
            Ok(Self {
                open_device: entry(&mlx5_lib, "mlx5dv_open_device"),
                is_supported: entry(&mlx5_lib, "mlx5dv_is_supported"),
                init_obj: entry(&mlx5_lib, "mlx5dv_init_obj"),
                obj_create: entry(&mlx5_lib, "mlx5dv_devx_obj_create"),
                obj_modify: entry(&mlx5_lib, "mlx5dv_devx_obj_modify"),
                obj_query: entry(&mlx5_lib, "mlx5dv_devx_obj_query"),
                obj_destroy: entry(&mlx5_lib, "mlx5dv_devx_obj_destroy"),
                general_cmd: entry(&mlx5_lib, "mlx5dv_devx_general_cmd"),
                umem_reg: entry(&mlx5_lib, "mlx5dv_devx_umem_reg"),
                umem_reg_ex: entry(&mlx5_lib, "mlx5dv_devx_umem_reg_ex"),
                umem_dereg: entry(&mlx5_lib, "mlx5dv_devx_umem_dereg"),
                alloc_uar: entry(&mlx5_lib, "mlx5dv_devx_alloc_uar"),
                free_uar: entry(&mlx5_lib, "mlx5dv_devx_free_uar"),
                query_eqn: entry(&mlx5_lib, "mlx5dv_devx_query_eqn"),
                emu_uar_page: entry(&ibverbs_lib, "ibgda_emu_uar_page"),
                _mlx5: mlx5_lib,
                _ibverbs: ibverbs_lib,
            })
        }
    }

    /// The process's libraries, loaded once.
    pub(crate) fn get() -> Result<&'static Self, Mlx5Error> {
        static LIBS: OnceLock<Result<Libraries, Mlx5Error>> = OnceLock::new();
        LIBS.get_or_init(|| Self::load_from(IBVERBS, MLX5))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The entry points the library lacks.
    pub(crate) fn missing(&self) -> Vec<&'static str> {
        let all: [(&'static str, bool); 14] = [
            (self.open_device.symbol, self.open_device.present()),
            (self.is_supported.symbol, self.is_supported.present()),
            (self.init_obj.symbol, self.init_obj.present()),
            (self.obj_create.symbol, self.obj_create.present()),
            (self.obj_modify.symbol, self.obj_modify.present()),
            (self.obj_query.symbol, self.obj_query.present()),
            (self.obj_destroy.symbol, self.obj_destroy.present()),
            (self.general_cmd.symbol, self.general_cmd.present()),
            (self.umem_reg.symbol, self.umem_reg.present()),
            (self.umem_reg_ex.symbol, self.umem_reg_ex.present()),
            (self.umem_dereg.symbol, self.umem_dereg.present()),
            (self.alloc_uar.symbol, self.alloc_uar.present()),
            (self.free_uar.symbol, self.free_uar.present()),
            (self.query_eqn.symbol, self.query_eqn.present()),
        ];
        all.iter()
            .filter(|(_, present)| !present)
            .map(|(symbol, _)| *symbol)
            .collect()
    }
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
