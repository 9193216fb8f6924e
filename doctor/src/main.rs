//! `ibgda-doctor`: checks this host for GPU-initiated RDMA with ibgda, in the order
//! bring-up fails, and prints a table (check, result, what to do); `--json` for scripts.
//! Exit status 0 when everything ibgda needs is there, 1 otherwise (2 for bad arguments).
//!
//! "Needed" is what ibgda's queues cannot run without: rdma-core's libraries, an mlx5
//! device with DEVX (a context, a UAR), CQE version 1, RC send queues, a host UMEM, an
//! active port with an address (a LID, or a RoCE v2 GID). Atomics, DC, DMA-BUF support in
//! rdma-core and everything of the GPU are reported (a warning says what is lost and what
//! to do) but do not fail the run: without a GPU, or with a GPU that cannot use the NIC
//! directly, ibgda still runs on the CPU path (host producers, the CPU proxy, the
//! CPU-assisted doorbell), and the doorbell-path row says which. `--require gpu` (or
//! `cpu-assisted`, `proxy`) makes that path needed.
//!
//! Every probe runs under a time limit (`--timeout`), so no driver call hangs the doctor;
//! a check that cannot run says why and whether it matters.

mod bounded;
mod gpu;
mod host;
mod nic;
mod path;
mod pci;
mod platform;
mod report;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::path::DoorbellPath;
use crate::report::{Report, Row, Status};

/// Checks this host for GPU-initiated RDMA with ibgda.
#[derive(Parser, Debug)]
#[command(name = "ibgda-doctor", version, about, long_about = None)]
struct Cli {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// The RDMA device to check (default: `IBGDA_NIC`, else the first mlx5 device).
    #[arg(long, value_name = "NAME")]
    device: Option<String>,
    /// The CUDA ordinal of the GPU to check.
    #[arg(long, value_name = "N", default_value_t = 0)]
    gpu: usize,
    /// Fail unless this doorbell path (or a better one) is available: gpu, cpu-assisted,
    /// proxy, host.
    #[arg(long, value_name = "PATH", value_parser = parse_path)]
    require: Option<DoorbellPath>,
    /// Seconds each probe (host files, NIC, GPU) may take before it is cut off.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    timeout: f64,
    /// Read /proc and /sys under this directory instead of / (for tests, and for a copy of
    /// another host's files).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: std::path::PathBuf,
}

fn parse_path(name: &str) -> Result<DoorbellPath, String> {
    DoorbellPath::from_name(name)
        .ok_or_else(|| format!("`{name}`: one of gpu, cpu-assisted, proxy, host"))
}

/// What the host probe gathers: files of /proc and /sys.
#[derive(Clone, Debug, Default)]
struct HostProbe {
    host: host::HostFacts,
    nics: Vec<nic::SysfsNic>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !(cli.timeout.is_finite() && cli.timeout > 0.0 && cli.timeout <= 3600.0) {
        eprintln!(
            "ibgda-doctor: --timeout {} is not between 0 and 3600 seconds",
            cli.timeout
        );
        return ExitCode::from(2);
    }
    let limit = Duration::from_secs_f64(cli.timeout);
    let requested = cli.device.clone().or_else(|| {
        std::env::var(ibgda::nic::mlx5::NIC_ENV)
            .ok()
            .filter(|n| !n.is_empty())
    });
    let root = host::Root::new(&cli.root);

    let probe_root = root.clone();
    let (probed, host_ending) = bounded::run(HostProbe::default(), limit, move |p| {
        p.step("reading /proc and /sys");
        let host = host::HostFacts::gather(&probe_root);
        let nics = nic::sysfs_nics(&probe_root);
        p.record(|f| *f = HostProbe { host, nics });
    });

    let wanted = requested.clone();
    let (mut nic_facts, ending) = bounded::run(nic::NicFacts::default(), limit, move |p| {
        nic::probe(wanted, p)
    });
    nic_facts.ending = Some(ending);
    let nic_rows = nic::rows(&nic_facts, &probed.nics, &probed.host, requested.as_deref());
    let nic_usable = !nic_rows.iter().any(Row::fails_run)
        && nic_rows
            .iter()
            .all(|r| !r.needed || r.status != Status::Skip);
    let opened = match &nic_facts.opened {
        Some(Ok(name)) if nic_usable => Some(name.clone()),
        _ => None,
    };
    let nic_why = match (&opened, nic_rows.iter().find(|r| r.fails_run())) {
        (Some(_), _) => None,
        (None, Some(failed)) => Some(format!("the {} check failed", failed.check)),
        (None, None) => Some("the NIC checks did not complete".to_owned()),
    };

    let gpu_ordinal = cli.gpu;
    let nic_for_gpu = opened.clone();
    let (mut gpu_facts, ending) = bounded::run(gpu::GpuFacts::default(), limit, move |p| {
        gpu::probe(gpu_ordinal, nic_for_gpu, p)
    });
    gpu_facts.ending = Some(ending);

    // The GPUs to place in the PCI tree: CUDA's, else those the driver lists.
    let named: Vec<(String, String)> = if gpu_facts.gpus.is_empty() {
        probed
            .host
            .nvidia_gpus
            .iter()
            .map(|a| (a.clone(), a.clone()))
            .collect()
    } else {
        gpu_facts
            .gpus
            .iter()
            .filter_map(|g| Some((format!("GPU {}", g.ordinal), g.bus_id.clone()?)))
            .collect()
    };
    let gpu_root = root.clone();
    let (sysfs_gpus, _) = bounded::run(Vec::new(), limit, move |p| {
        p.step("reading the GPUs' sysfs entries");
        let found = platform::sysfs_gpus(&gpu_root, &named);
        p.record(|f| *f = found);
    });

    let mut rows = Vec::new();
    if let Some(reason) = host_ending.reason() {
        rows.push(
            Row::new("host_files", "/proc and /sys", Status::Warn).result(format!(
                "reading them stopped: {reason}; the rows that use them may miss facts"
            )),
        );
    }
    rows.extend(nic_rows);
    rows.extend(gpu::rows(&gpu_facts, &probed.host, nic_why.as_deref()));
    rows.push(platform::iommu_row(&probed.host, &sysfs_gpus, &probed.nics));
    let tested = gpu_facts.tested.map(|t| format!("GPU {t}"));
    rows.push(platform::pcie_row(
        &sysfs_gpus,
        &probed.nics,
        nic_facts
            .opened
            .as_ref()
            .and_then(|o| o.as_ref().ok())
            .map(String::as_str),
        tested.as_deref(),
    ));
    let inputs = gpu::path_inputs(&gpu_facts, &rows, nic_usable);
    let (path_row, path) = path::row(&inputs, cli.require);
    rows.push(path_row);

    let report = Report::new(rows, path.map_or("none", DoorbellPath::name));
    if cli.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.table());
    }
    // A probe cut off at its limit may still be inside a driver call: exit without
    // waiting for it.
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(i32::from(report.exit_code()));
}
