//! The JSON a run writes: the machine, the GPU, every parameter and raw percentiles.

use serde::{Deserialize, Serialize};

use crate::gpu::{GpuResult, PeersResult};
use crate::host::HostPostResult;
use crate::moe::MoeBench;
use crate::proxy::ProxyResult;
use crate::softnic::SoftnicResult;

/// Version of this schema; bumped when a field changes meaning or is removed.
pub const SCHEMA_VERSION: u32 = 1;

/// One run of `ibgda-bench`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `ibgda-bench <version>`.
    pub tool: String,
    /// Start of the run, seconds since the Unix epoch (UTC).
    pub started_unix_s: u64,
    /// Whether sizes were the quick (CI) ones.
    pub quick: bool,
    /// The host.
    pub machine: Machine,
    /// The GPU, when a GPU experiment ran.
    pub gpu: Option<GpuInfo>,
    /// Host post rate: ibgda against rdma-core's provider.
    pub host_post: Option<HostPostResult>,
    /// Software NIC WQE/s per core.
    pub softnic: Option<SoftnicResult>,
    /// GPU experiments against the doorbell sink.
    pub gpu_sink: Option<GpuResult>,
    /// DOCA GPUNetIO's issue loop beside ibgda's.
    #[serde(default)]
    pub peers: Option<PeersResult>,
    /// The CPU proxy and the CPU-assisted doorbell on software NICs.
    #[serde(default)]
    pub proxy: Option<ProxyResult>,
    /// The MoE dispatch and combine over the CUDA software NIC.
    #[serde(default)]
    pub moe: Option<MoeBench>,
    /// Experiments asked for but not run, with why.
    pub skipped: Vec<Skipped>,
    /// Whether an experiment asked for failed (it is listed in `skipped`).
    #[serde(default)]
    pub failed: bool,
}

/// An experiment that did not run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Skipped {
    /// The experiment.
    pub experiment: String,
    /// Why.
    pub reason: String,
}

/// The host the run was on.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// `std::env::consts::OS` / `ARCH`.
    pub os: String,
    /// CPU architecture.
    pub arch: String,
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// Logical CPUs this process may use.
    pub logical_cpus: usize,
    /// Kernel release from /proc/sys/kernel/osrelease.
    pub kernel: String,
}

impl Machine {
    /// Reads what this host says about itself (empty strings where it says nothing).
    pub fn probe() -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        Self {
            hostname: read("/proc/sys/kernel/hostname"),
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            cpu_model,
            logical_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }
}

/// The GPU: what `nvidia-smi` reports, and the SM clock the run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Name (`nvidia-smi --query-gpu=name`).
    pub name: String,
    /// Driver version.
    pub driver: String,
    /// SM clock nvidia-smi reported before the run (MHz, as it prints it).
    pub smi_sm_clock: String,
    /// Maximum SM clock nvidia-smi reports.
    pub smi_max_sm_clock: String,
    /// SM clock measured by the kernels: clock64 cycles over %globaltimer ns (MHz).
    pub measured_sm_clock_mhz: f64,
}

impl GpuInfo {
    /// Asks `nvidia-smi` about GPU 0; fields stay empty if it is absent.
    pub fn probe() -> Self {
        let out = std::process::Command::new("nvidia-smi")
            .args([
                "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                "--format=csv,noheader",
                "--id=0",
            ])
            .output();
        let text = out
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let fields: Vec<String> = text
            .lines()
            .next()
            .unwrap_or("")
            .split(',')
            .map(|f| f.trim().to_string())
            .collect();
        let field = |i: usize| fields.get(i).cloned().unwrap_or_default();
        Self {
            name: field(0),
            driver: field(1),
            smi_sm_clock: field(2),
            smi_max_sm_clock: field(3),
            measured_sm_clock_mhz: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_round_trips_through_json() {
        let mut report = crate::plot::tests::gpu_report();
        report.schema_version = SCHEMA_VERSION;
        report.skipped.push(Skipped {
            experiment: "gpu".into(),
            reason: "test".into(),
        });
        let text = serde_json::to_string(&report).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value["gpu_sink"]["issue"][2]["scope"],
            serde_json::json!("GpuFencedDbrec")
        );
        assert_eq!(value["gpu_sink"]["sm_clock_mhz"], serde_json::json!(1980.0));
    }
}
