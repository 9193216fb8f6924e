//! Plots of a report, as PNG and SVG, mirroring the paper's tables with its numbers
//! beside ours. Text is drawn with DejaVu Sans embedded from the `dejavu` crate (through
//! plotters' ab_glyph backend), so no installed font is needed.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::paper;
use crate::proxy::{Producers, ProxyResult};
use crate::record::Report;
use crate::BenchError;

const FONT: &str = "sans-serif";
const WIDTH: u32 = 1100;
const HEIGHT: u32 = 620;
const PALETTE: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(120, 120, 120),
    RGBColor(44, 160, 44),
];

fn register() -> Result<(), BenchError> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            if register_font(FONT, style, dejavu::sans::regular()).is_err() {
                result = Err(BenchError::Plot(
                    "the embedded DejaVu Sans did not load".into(),
                ));
            }
        }
    });
    result
}

/// Bars grouped by category, one bar per series; `None` leaves a gap.
struct Bars<'a> {
    title: &'a str,
    y_label: &'a str,
    series: &'a [&'a str],
    groups: Vec<(String, Vec<Option<f64>>)>,
    /// A horizontal reference line (value, label).
    target: Option<(f64, &'a str)>,
}

fn err<E: std::fmt::Debug>(e: E) -> BenchError {
    BenchError::Plot(format!("{e:?}"))
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, bars: &Bars<'_>) -> Result<(), BenchError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let top = bars
        .groups
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .chain(bars.target.map(|(v, _)| v))
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let n = bars.groups.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(bars.title, (FONT, 22))
        .margin(14)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, 0f64..top)
        .map_err(err)?;
    let labels: Vec<String> = bars.groups.iter().map(|(l, _)| l.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            // Label each group once, at its centre.
            if (x - (i as f64 + 0.5)).abs() < 1e-6 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_label_style((FONT, 13))
        .y_desc(bars.y_label)
        .y_label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    let k = bars.series.len().max(1) as f64;
    let width = 0.8 / k;
    for (s, name) in bars.series.iter().enumerate() {
        let color = PALETTE[s % PALETTE.len()];
        let rects = bars
            .groups
            .iter()
            .enumerate()
            .filter_map(|(g, (_, values))| {
                values.get(s).copied().flatten().map(|v| {
                    let x0 = g as f64 + 0.1 + s as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.95, v)], color.filled())
                })
            });
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        let texts = bars
            .groups
            .iter()
            .enumerate()
            .filter_map(|(g, (_, values))| {
                values.get(s).copied().flatten().map(|v| {
                    let x0 = g as f64 + 0.1 + s as f64 * width;
                    Text::new(format_value(v), (x0, v + top * 0.01), (FONT, 11))
                })
            });
        chart.draw_series(texts).map_err(err)?;
    }
    if let Some((value, label)) = bars.target {
        let red = RGBColor(200, 30, 30);
        chart
            .draw_series(LineSeries::new(
                [(0.0, value), (n as f64, value)],
                red.stroke_width(2),
            ))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], red.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Renders `bars` to `<dir>/<stem>.png` and `.svg`; returns both paths.
fn render(dir: &Path, stem: &str, bars: &Bars<'_>) -> Result<Vec<PathBuf>, BenchError> {
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    draw(
        BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area(),
        bars,
    )?;
    draw(
        SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area(),
        bars,
    )?;
    Ok(vec![png, svg])
}

/// Renders `bars` twice as wide (for many groups).
fn render_wide(dir: &Path, stem: &str, bars: &Bars<'_>) -> Result<Vec<PathBuf>, BenchError> {
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    let size = (WIDTH * 2, HEIGHT);
    draw(BitMapBackend::new(&png, size).into_drawing_area(), bars)?;
    draw(SVGBackend::new(&svg, size).into_drawing_area(), bars)?;
    Ok(vec![png, svg])
}

/// A rate label compacted for an axis: without its parenthesised note, and with
/// threads, QPs, SMs and batch as T, Q, SM and B ("16 threads, 16 QPs, 16 SMs, batch 16"
/// is "16T 16Q 16SM B16").
fn short_label(label: &str) -> String {
    let label = label.split(" (").next().unwrap_or(label);
    [
        (" threads", "T"),
        (" thread", "T"),
        (" warps", "W"),
        (" warp", "W"),
        (" QPs", "Q"),
        (" QP", "Q"),
        (" SMs", "SM"),
        (" SM", "SM"),
        ("batch ", "B"),
        ("per-thread", "thr"),
        ("per-warp", "warp"),
        (", ", " "),
    ]
    .iter()
    .fold(label.to_string(), |l, (from, to)| l.replace(from, to))
}

/// Renders every plot the report has data for into `dir`; returns the files written.
pub fn render_report(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    register()?;
    let mut files = Vec::new();
    if let Some(h) = &report.host_post {
        let bars = Bars {
            title: &format!(
                "Host post, 8 B inline RC WRITE, one core: ibgda {:.2}x rdma-core ({:.2}x with the WQE built once)",
                h.speedup_p50, h.speedup_prebuilt_p50
            ),
            y_label: "ns per post (p50; p99 in the JSON)",
            series: &[
                "ibgda (build + post)",
                "ibgda (WQE built once)",
                "rdma-core mlx5_post_send",
            ],
            groups: vec![(
                "encode + publish + doorbell record + doorbell".into(),
                vec![
                    Some(h.ibgda.ns_per_post.p50),
                    Some(h.ibgda_prebuilt.ns_per_post.p50),
                    Some(h.rdma_core.ns_per_post.p50),
                ],
            )],
            target: None,
        };
        files.extend(render(dir, "host_post", &bars)?);
    }
    if let Some(s) = &report.softnic {
        let bars = Bars {
            title: "CPU software NIC, one core",
            y_label: "M WQE/s (p50 of rounds)",
            series: &["ibgda software NIC"],
            groups: s
                .rows
                .iter()
                .map(|r| {
                    (
                        r.kind.label().to_string(),
                        vec![Some(r.wqes_per_s_p50 / 1e6)],
                    )
                })
                .collect(),
            target: Some((s.target_wqes_per_s / 1e6, "target")),
        };
        files.extend(render(dir, "softnic", &bars)?);
    }
    if let Some(g) = &report.gpu_sink {
        let title = format!(
            "Table 4: issue of one 8 B inline RC WRITE per scope (p50; ours at {:.0} MHz SM, paper about {:.0})",
            g.sm_clock_mhz,
            paper::SM_CLOCK_MHZ
        );
        let bars = Bars {
            title: &title,
            y_label: "µs",
            series: &["ibgda typed", "raw baseline", "paper mini-gda (P-IB)"],
            groups: g
                .issue
                .iter()
                .map(|r| {
                    let paper_issue = paper::table4(&r.scope).map(|(_, issue, _)| issue);
                    (
                        r.scope.clone(),
                        vec![
                            Some(r.typed.issue_ns.p50 / 1e3),
                            Some(r.raw.issue_ns.p50 / 1e3),
                            paper_issue,
                        ],
                    )
                })
                .collect(),
            target: None,
        };
        files.extend(render(dir, "table4_issue", &bars)?);
        // Table 5: the GpuFence rows the paper has, ours beside its figure.
        let bars = Bars {
            title: "Table 5: posting rate [GpuFence] (ours: doorbell sink, no NIC)",
            y_label: "M WQE/s",
            series: &["ibgda", "paper mini-gda (P-IB)"],
            groups: g
                .rates
                .iter()
                .filter(|r| r.scope == "GpuFence")
                .filter_map(|r| {
                    paper::table5(&r.label)
                        .map(|v| (short_label(&r.label), vec![Some(r.mwqe_per_s), Some(v)]))
                })
                .collect(),
            target: None,
        };
        if !bars.groups.is_empty() {
            files.extend(render_wide(dir, "table5_rate", &bars)?);
        }
        // Completion scope: one queue vs quiet, by queue count.
        let mut queues: Vec<u32> = g.completion.iter().map(|c| c.queues).collect();
        queues.dedup();
        let point = |q: u32, wait: &str| {
            g.completion
                .iter()
                .find(|c| c.queues == q && c.wait == wait)
                .map(|c| c.put_c_ns.p50 / 1e3)
        };
        let bars = Bars {
            title: "Completion scope [GpuFence]: put+c p50 against the sink",
            y_label: "µs",
            series: &["wait for the one queue", "quiet over all queues"],
            groups: queues
                .iter()
                .map(|&q| {
                    (
                        format!("{q} QPs"),
                        vec![point(q, "OneQueue"), point(q, "AllQueues")],
                    )
                })
                .collect(),
            target: None,
        };
        if !bars.groups.is_empty() {
            files.extend(render(dir, "completion_scope", &bars)?);
        }
        // Table 3 and Figure 3: one operation's shape, issue typed and raw, the paper's
        // mini-gda figure where it has one (8 B inline and pointer; the inline slope).
        let bars = Bars {
            title: "Table 3 / Figure 3: issue of one WRITE by shape [GpuFence], p50",
            y_label: "ns",
            series: &["ibgda typed", "raw", "paper (mini-gda, P-IB)"],
            groups: g
                .shapes
                .iter()
                .map(|r| {
                    let paper = match (r.kind.as_str(), r.bytes) {
                        ("Inline", b) if b <= paper::FIG3_INLINE_GAIN_ENDS_BYTES => {
                            Some(paper::fig3_inline_issue_us(b) * 1e3)
                        }
                        ("Pointer", 8) => Some(paper::TABLE3_MINI_GDA_POINTER.0 * 1e3),
                        _ => None,
                    };
                    (
                        short_label(&r.label),
                        vec![Some(r.typed.issue_ns.p50), Some(r.raw.issue_ns.p50), paper],
                    )
                })
                .collect(),
            target: None,
        };
        if !bars.groups.is_empty() {
            files.extend(render_wide(dir, "table3_shapes", &bars)?);
        }
        // Figure 9: dormant cost, loss against the plain kernel, one plot per caller.
        for (caller, stem) in [
            ("Compute", "dormant_compute"),
            ("Streaming", "dormant_streaming"),
        ] {
            let title = format!(
                "Figure 9: dormant cost of a {caller} kernel, loss against the plain kernel"
            );
            let bars = Bars {
                title: &title,
                y_label: "% slower than plain",
                series: &["ibgda"],
                groups: g
                    .dormant
                    .iter()
                    .filter(|d| d.caller == caller)
                    .map(|d| {
                        (
                            format!(
                                "{} {}{}{}",
                                d.build,
                                d.messages,
                                if d.wait { " w" } else { "" },
                                if d.blocks > 528 { " 8/SM" } else { "" }
                            ),
                            vec![Some(d.loss * 100.0)],
                        )
                    })
                    .collect(),
                target: None,
            };
            if !bars.groups.is_empty() {
                files.extend(render_wide(dir, stem, &bars)?);
            }
        }
    }
    if let Some(p) = &report.peers {
        let bars = Bars {
            title: "Peers: issue of one 8 B inline RC WRITE, same queue memory and sink (p50)",
            y_label: "ns",
            series: &["issue", "put+c (sink)"],
            groups: [
                ("ibgda typed", Some(&p.ibgda_typed)),
                ("ibgda raw", Some(&p.ibgda_raw)),
                ("DOCA GPUNetIO", p.doca.as_ref()),
                (
                    "NVSHMEM IBGDA",
                    p.nvshmem.as_ref().and_then(|n| n.run.as_ref()),
                ),
            ]
            .iter()
            .map(|(what, side)| {
                (
                    what.to_string(),
                    vec![side.map(|s| s.issue_ns.p50), side.map(|s| s.put_c_ns.p50)],
                )
            })
            .collect(),
            target: None,
        };
        files.extend(render(dir, "peers", &bars)?);
    }
    if let Some(p) = &report.proxy {
        files.extend(render_proxy(p, dir)?);
    }
    if let Some(m) = &report.moe {
        let groups = m
            .rows
            .iter()
            .flat_map(|r| {
                let phases = [
                    ("dispatch", r.typed.dispatch_us.p50, r.raw.dispatch_us.p50),
                    ("combine", r.typed.combine_us.p50, r.raw.combine_us.p50),
                    ("total", r.typed.total_us.p50, r.raw.total_us.p50),
                ];
                phases.into_iter().map(move |(name, t, w)| {
                    (format!("{} {name}", r.format), vec![Some(t), Some(w)])
                })
            })
            .collect();
        let bars = Bars {
            title: "MoE dispatch and combine, 8 ranks on one GPU, CUDA software NIC's figures (not a ConnectX's)",
            y_label: "µs (p50)",
            series: &["device API", "builders (raw)"],
            groups,
            target: None,
        };
        files.extend(render_wide(dir, "moe", &bars)?);
    }
    Ok(files)
}

/// The proxy's plots, the paper's P-IB figures beside ours: `proxy_enqueue` (Table 3),
/// `proxy_rate` (Table 10, Figure 7), `proxy_probe` (Table 11), `proxy_assisted`.
fn render_proxy(p: &ProxyResult, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let who = match p.params.producers {
        Producers::Cpu => "CPU producers".to_string(),
        Producers::Gpu => match p.sm_clock_mhz {
            Some(mhz) => format!("GPU producers, SM {mhz:.0} MHz"),
            None => "GPU producers".to_string(),
        },
    };
    let title =
        format!("Proxy enqueue and put+c p50 ({who}; ours: software NIC, paper: ConnectX-7)");
    let bars = Bars {
        title: &title,
        y_label: "µs",
        series: &[
            "ibgda enqueue",
            "paper mini-proxy enqueue (P-IB)",
            "ibgda put+c (software NIC)",
            "paper put+c (P-IB)",
        ],
        groups: p
            .enqueue
            .iter()
            .map(|r| {
                (
                    r.handoff.clone(),
                    vec![
                        Some(r.enqueue_ns.p50 / 1e3),
                        r.paper_enqueue_us,
                        Some(r.put_completion_ns.p50 / 1e3),
                        r.paper_put_completion_us,
                    ],
                )
            })
            .collect(),
        target: None,
    };
    if !bars.groups.is_empty() {
        files.extend(render(dir, "proxy_enqueue", &bars)?);
    }
    let title =
        format!("Proxy message rate over T workers, R rings, B batch ({who}; software NIC)");
    let bars = Bars {
        title: &title,
        y_label: "M msg/s",
        series: &["ibgda proxy", "paper mini-proxy (P-IB, cold)"],
        groups: p
            .rates
            .iter()
            .map(|r| {
                (
                    format!("T{} R{} B{}", r.workers, r.rings, r.batch),
                    vec![Some(r.mmsg_per_s), r.paper_mmsg_per_s],
                )
            })
            .collect(),
        target: None,
    };
    if !bars.groups.is_empty() {
        files.extend(render_wide(dir, "proxy_rate", &bars)?);
    }
    let title = format!(
        "Probe under bulk load, private vs shared ring, p50 ({who}; paper: loaded RTT, 64 CTAs)"
    );
    let bars = Bars {
        title: &title,
        y_label: "µs",
        series: &["ibgda put+c", "paper mini-proxy RTT T4/R32/B16 (P-IB)"],
        groups: p
            .probes
            .iter()
            .map(|r| {
                (
                    format!(
                        "{} ring, T{} R{} B{}, {} bulk producers",
                        r.ring, r.workers, r.bulk_rings, r.batch, r.bulk_producers
                    ),
                    vec![Some(r.probe_ns.p50 / 1e3), r.paper_rtt_p50_us],
                )
            })
            .collect(),
        target: None,
    };
    if !bars.groups.is_empty() {
        files.extend(render(dir, "proxy_probe", &bars)?);
    }
    let title = format!("CPU-assisted doorbell ({who}; software NICs)");
    let bars = Bars {
        title: &title,
        y_label: "M WQE/s",
        series: &["ibgda"],
        groups: p
            .assisted
            .iter()
            .map(|r| {
                (
                    format!(
                        "{} forwarder(s), {} queues, B{}",
                        r.forwarders, r.queues, r.batch
                    ),
                    vec![Some(r.mwqe_per_s)],
                )
            })
            .collect(),
        target: Some((
            paper::ASSISTED_P_IB_MMSG_PER_S,
            "paper: host thread ringing for GPU-built WQEs, 258 M msg/s (P-IB)",
        )),
    };
    if !bars.groups.is_empty() {
        files.extend(render(dir, "proxy_assisted", &bars)?);
    }
    Ok(files)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gpu::{
        CompletionRow, DormantRow, GpuParams, GpuResult, IssueRow, IssueSide, PeersResult, RateRow,
        RegisterRow,
    };
    use crate::stats::Percentiles;

    fn side(p50: f64) -> IssueSide {
        let p = Percentiles {
            count: 1,
            p50,
            ..Percentiles::default()
        };
        IssueSide {
            issue_ns: p,
            issue_cycles: p,
            put_c_ns: p,
            sm_clock_mhz: 1980.0,
        }
    }

    /// A report with every GPU section, as the GPU machine writes it.
    pub(crate) fn gpu_report() -> Report {
        let rate = |label: &str, mwqe_per_s: f64| RateRow {
            label: label.into(),
            scope: "GpuFence".into(),
            publication: "PerWarp".into(),
            blocks: 1,
            threads: 32,
            queues: 1,
            share: 1,
            batch: 32,
            wqes: 640_000,
            seconds: 0.05,
            mwqe_per_s,
            sm_clock_mhz: 1980.0,
            stale_wqes: None,
            sink_doorbells: 20_000,
            sink_mode: "Retire".into(),
            sink_bound_mwqe_per_s: Some(30.0),
        };
        let p = Percentiles {
            count: 1,
            p50: 4000.0,
            ..Percentiles::default()
        };
        Report {
            gpu_sink: Some(GpuResult {
                params: GpuParams::default(),
                shapes: vec![],
                issue: paper::TABLE4_P_IB
                    .iter()
                    .map(|(scope, ..)| IssueRow {
                        scope: scope.to_string(),
                        typed: side(700.0),
                        raw: side(690.0),
                        typed_over_raw: 700.0 / 690.0,
                        stale_wqes: None,
                    })
                    .collect(),
                completion: [
                    (1, "OneQueue"),
                    (1, "AllQueues"),
                    (16, "OneQueue"),
                    (16, "AllQueues"),
                ]
                .iter()
                .map(|&(queues, wait)| CompletionRow {
                    scope: "GpuFence".into(),
                    queues,
                    wait: wait.into(),
                    put_c_ns: p,
                    sm_clock_mhz: 1980.0,
                })
                .collect(),
                rates: vec![
                    rate("32 threads, 1 QP, per-warp, batch 32 (paper 21.6)", 12.8),
                    rate("batch sweep: 1 thread, 1 QP, batch 4", 3.0),
                ],
                sink_capacity: Vec::new(),
                nic_rate: Vec::new(),
                dormant_registers: vec![RegisterRow {
                    caller: "Compute".into(),
                    build: "Plain".into(),
                    registers: 29,
                    stack_bytes: 0,
                    spill_stores: 0,
                    spill_loads: 0,
                    blocks_per_sm: 8,
                }],
                dormant: vec![DormantRow {
                    caller: "Compute".into(),
                    build: "Inlined".into(),
                    blocks: 528,
                    registers: 32,
                    messages: 4,
                    wait: true,
                    ns: p,
                    sm_mhz: vec![1980.0],
                    loss: 0.019,
                }],
                sm_clock_mhz: 1980.0,
                failed: Vec::new(),
            }),
            peers: Some(PeersResult {
                iterations: 10,
                ibgda_typed: side(700.0),
                ibgda_raw: side(690.0),
                doca: Some(side(1600.0)),
                doca_error: None,
                doca_qp_struct_bytes: 256,
                doca_wqes_examined: 10,
                doca_wqes_parsed: 10,
                doca_parse_errors: vec![],
                doca_byte_differences: vec![],
                nvshmem: None,
            }),
            ..Report::default()
        }
    }

    #[test]
    fn every_gpu_plot_is_written_as_png_and_svg_with_the_papers_numbers() {
        let dir = std::env::temp_dir().join(format!("ibgda-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = render_report(&gpu_report(), &dir).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let stems = [
            "table4_issue",
            "table5_rate",
            "completion_scope",
            "dormant_compute",
            "peers",
        ];
        let expected: Vec<String> = stems
            .iter()
            .flat_map(|s| [format!("{s}.png"), format!("{s}.svg")])
            .collect();
        assert_eq!(names, expected);
        let png = std::fs::read(dir.join("table4_issue.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        // The SVG carries the text: our scope names and the paper's figures.
        let svg = std::fs::read_to_string(dir.join("table4_issue.svg")).unwrap();
        assert!(svg.contains("GpuFencedDbrec"), "scope label");
        assert!(
            svg.contains("0.93"),
            "paper's issue time for + fenced doorbell record"
        );
        let svg = std::fs::read_to_string(dir.join("table5_rate.svg")).unwrap();
        assert!(svg.contains("21.6"), "paper's one-warp rate");
        assert!(svg.contains("32T 1Q warp B32"), "compact label");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_proxy_plots_are_written_with_the_papers_numbers() {
        let dir = std::env::temp_dir().join(format!("ibgda-bench-proxy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let report = Report {
            proxy: Some(crate::proxy::tests::proxy_result()),
            ..Report::default()
        };
        let files = render_report(&report, &dir).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let expected: Vec<String> = [
            "proxy_enqueue",
            "proxy_rate",
            "proxy_probe",
            "proxy_assisted",
        ]
        .iter()
        .flat_map(|s| [format!("{s}.png"), format!("{s}.svg")])
        .collect();
        assert_eq!(names, expected);
        let svg = |stem: &str| std::fs::read_to_string(dir.join(format!("{stem}.svg"))).unwrap();
        // A drawn text element whose whole content is `text` (not a digit run of a
        // coordinate).
        let drawn = |svg: &str, text: &str| svg.contains(&format!(">\n{text}\n</text>"));
        let enqueue = svg("proxy_enqueue");
        assert!(
            drawn(&enqueue, "2.27") && drawn(&enqueue, "0.13"),
            "Table 3 enqueue"
        );
        assert!(
            drawn(&enqueue, "7.07") && drawn(&enqueue, "4.10"),
            "Table 3 put+c"
        );
        assert!(drawn(&enqueue, "tuned"), "handoff label");
        let rate = svg("proxy_rate");
        assert!(drawn(&rate, "14.4") && drawn(&rate, "2.60"), "Table 10");
        assert!(drawn(&rate, "T1 R32 B16"), "T x R x B label");
        let probe = svg("proxy_probe");
        assert!(drawn(&probe, "2190") && drawn(&probe, "115"), "Table 11");
        let assisted = svg("proxy_assisted");
        assert!(assisted.contains("258 M msg/s"), "host thread ringing");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
