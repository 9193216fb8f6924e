// The programs that safe launchers run are compiled with typed options only.
use ibgda_kernels::gpu::Gpu;

fn main() {
    let _ = Gpu::open_with(0, &["-DIBGDA_SPIN_LIMIT_NS=1", "--define-macro=ibgda=evil"]);
}
