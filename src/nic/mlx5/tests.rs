//! Unit tests of the mlx5 backend that need no device: library loading and its typed
//! failures, command-failure decoding, and the construction and advice of every error.

use super::dv::Libraries;
use super::*;
use crate::cq::{parse_cqe, Completion, Syndrome};
use crate::nic::gpu_access::{DmaBufExportError, IoMapError};
use crate::nic::prm::{Command, CommandOutput, CommandStatus, CreateQp, CreateQpOutput, PrmError};

/// A library name no system has.
const ABSENT: &str = "libibgda-absent-library.so.1";

#[test]
fn a_missing_library_is_named() {
    let err = Libraries::load_from(ABSENT, MLX5).unwrap_err();
    match &err {
        Mlx5Error::LibraryMissing { library, reason } => {
            assert_eq!(*library, ABSENT);
            // The loader's own message (dlerror), not libloading's "dlopen failed".
            assert!(
                reason.contains(ABSENT) && reason.contains("cannot open shared object file"),
                "{reason}"
            );
        }
        other => panic!("expected LibraryMissing, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.starts_with(ABSENT), "{msg}");
    assert!(
        msg.contains("apt install libibverbs1 ibverbs-providers"),
        "{msg}"
    );
    assert!(err.is_no_device());
}

#[test]
fn a_library_of_another_rdma_core_is_a_mismatch_not_a_missing_library() {
    // The loader's message for rdma-core 44's libmlx5.so.1 over a libibverbs.so.1 that
    // lacks its private symbols (the emulator's; ibgda-doctor's emulated test makes it).
    let reason = "/lib/x86_64-linux-gnu/libmlx5.so.1: undefined symbol: \
                  verbs_allow_disassociate_destroy, version IBVERBS_PRIVATE_34";
    let err = Mlx5Error::LibraryMismatch {
        library: MLX5,
        reason: reason.into(),
    };
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{MLX5} could not be loaded ({reason})")),
        "{msg}"
    );
    assert!(
        msg.contains("another rdma-core installation than the libibverbs.so.1"),
        "{msg}"
    );
    assert!(msg.contains("LD_LIBRARY_PATH"), "{msg}");
    assert!(
        !msg.contains("apt install"),
        "installing does not help: {msg}"
    );
    assert!(err.is_no_device());
    assert_eq!(
        crate::nic::NicError::from(err),
        crate::nic::NicError::NoDevice { reason: msg }
    );
}

#[test]
fn every_missing_entry_point_is_unsupported_by_name() {
    // The C library loads but has none of the mlx5dv entry points.
    let libs = Libraries::load_from("libc.so.6", "libc.so.6").expect("libc loads");
    let missing = libs.missing();
    let expected = [
        "mlx5dv_open_device",
        "mlx5dv_is_supported",
        "mlx5dv_init_obj",
        "mlx5dv_devx_obj_create",
        "mlx5dv_devx_obj_modify",
        "mlx5dv_devx_obj_query",
        "mlx5dv_devx_obj_destroy",
        "mlx5dv_devx_general_cmd",
        "mlx5dv_devx_umem_reg",
        "mlx5dv_devx_umem_reg_ex",
        "mlx5dv_devx_umem_dereg",
        "mlx5dv_devx_alloc_uar",
        "mlx5dv_devx_free_uar",
        "mlx5dv_devx_query_eqn",
    ];
    assert_eq!(missing, expected);
    let err = libs.umem_reg_ex.get().map(|_| ()).unwrap_err();
    assert_eq!(
        err,
        Mlx5Error::Unsupported {
            symbol: "mlx5dv_devx_umem_reg_ex",
            library: MLX5
        }
    );
    assert!(err.to_string().contains("has no `mlx5dv_devx_umem_reg_ex`"));
    // rdma-core's versions of what a DEVX control plane over GPU memory needs.
    for version in [
        "mlx5dv_devx_umem_reg_ex >= 35",
        "DMA-BUF UMEM >= 43",
        "non-cached UAR >= 45",
    ] {
        assert!(err.to_string().contains(version), "{err}: {version}");
    }
    assert_eq!(
        libs.obj_create.get().map(|_| ()).unwrap_err(),
        Mlx5Error::Unsupported {
            symbol: "mlx5dv_devx_obj_create",
            library: MLX5
        }
    );
}

#[test]
fn rdma_core_libraries_load_with_every_entry_point() {
    // scripts/test installs libibverbs1 and ibverbs-providers (Debian 12's rdma-core 44
    // has every entry point, DMA-BUF UMEM included); their absence fails here, loudly.
    let libs = Libraries::get().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(libs.missing(), Vec::<&str>::new());
    Mlx5Device::check_libraries().unwrap();
}

/// The RDMA devices the kernel shows, read from sysfs independently of rdma-core.
fn sysfs_devices() -> Vec<String> {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_machine_without_a_device_reports_the_typed_no_device_error() {
    let present = sysfs_devices();
    let result = Mlx5Device::open(None);
    if present.is_empty() {
        let err = result.unwrap_err();
        println!("typed no-device error: {err}");
        match &err {
            Mlx5Error::NoDevice {
                requested,
                available,
                errno,
            } => {
                assert_eq!(*requested, None);
                assert!(available.is_empty());
                assert!(*errno == 0 || *errno == ENOSYS, "errno {errno}");
            }
            other => panic!("expected NoDevice, got {other:?}"),
        }
        assert!(err.is_no_device());
        assert!(err
            .to_string()
            .starts_with("no RDMA device (devices present: none)"));
        assert!(devices().map(|d| d.is_empty()).unwrap_or(true));
    } else {
        // A host with devices: opening either works or fails for a reason other than "no
        // device" (e.g. the first device is not mlx5).
        if let Err(e) = result {
            assert!(!matches!(e, Mlx5Error::NoDevice { .. }), "{e}");
        }
    }
}

#[test]
fn a_device_name_that_does_not_exist_is_no_device_naming_it() {
    let err = Mlx5Device::open(Some("mlx5_ibgda_absent")).unwrap_err();
    match &err {
        Mlx5Error::NoDevice { requested, .. } => {
            assert_eq!(requested.as_deref(), Some("mlx5_ibgda_absent"))
        }
        other => panic!("expected NoDevice, got {other:?}"),
    }
    assert!(err
        .to_string()
        .starts_with("no RDMA device named `mlx5_ibgda_absent`"));
}

#[test]
fn command_failures_decode_status_and_syndrome_through_the_prm_decoder() {
    // CREATE_QP (opcode 0x500) failing with BAD_PARAM (0x03), syndrome 0x1234abcd: the
    // output as the firmware writes it, built by the PRM encoder of failed outputs.
    let mut input = vec![0u8; CreateQp::INPUT_BYTES];
    input[0..2].copy_from_slice(&0x0500u16.to_be_bytes());
    let output = CreateQpOutput::encode_failure(CommandStatus::BadParameter, 0x1234_abcd).unwrap();
    let err = Mlx5Error::from_devx("mlx5dv_devx_obj_create", EREMOTEIO, &input, &output);
    assert_eq!(
        err,
        Mlx5Error::Command {
            opcode: 0x500,
            error: PrmError::CommandError {
                command: "CREATE_QP",
                status: CommandStatus::BadParameter,
                syndrome: 0x1234_abcd,
            }
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("(opcode 0x0500)"), "{msg}");
    assert!(msg.contains("CREATE_QP failed"), "{msg}");
    assert!(msg.contains("bad parameter (0x03)"), "{msg}");
    assert!(msg.contains("syndrome 0x1234abcd"), "{msg}");

    // Any other errno: the kernel refused the call; the output is not read.
    let err = Mlx5Error::from_devx("mlx5dv_devx_obj_create", EPERM, &input, &output);
    assert_eq!(
        err,
        Mlx5Error::DevxCall {
            call: "mlx5dv_devx_obj_create",
            command: "CREATE_QP",
            errno: EPERM
        }
    );
    assert!(err.to_string().contains("EPERM (1)"));

    // EREMOTEIO with a zero status (or an output too short to hold one) is no firmware
    // failure: the errno is reported.
    let ok = CreateQpOutput::encode_failure(CommandStatus::Ok, 0).unwrap();
    for output in [&ok[..], &[3u8, 0, 0, 0][..]] {
        let err = Mlx5Error::from_devx("mlx5dv_devx_obj_create", EREMOTEIO, &input, output);
        assert!(
            matches!(
                err,
                Mlx5Error::DevxCall {
                    errno: EREMOTEIO,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

#[test]
fn command_buffers_shorter_than_the_header_are_refused() {
    assert_eq!(
        devx::check_buffers(&[0; 7], &[0; 8]),
        Err(Mlx5Error::CommandBuffer {
            which: "input",
            len: 7,
            min: COMMAND_HEADER_BYTES
        })
    );
    assert_eq!(
        devx::check_buffers(&[0; 8], &[0; 4]),
        Err(Mlx5Error::CommandBuffer {
            which: "output",
            len: 4,
            min: COMMAND_HEADER_BYTES
        })
    );
    assert_eq!(devx::check_buffers(&[0; 8], &[0; 8]), Ok(()));
}

#[test]
fn uar_mapping_refusal_800_says_how_to_allow_it() {
    let err = Mlx5Error::from_uar_mapping(IoMapError {
        code: CUDA_ERROR_NOT_PERMITTED,
        message: "operation not permitted".into(),
    });
    let msg = err.to_string();
    assert!(msg.contains("CUDA error 800"), "{msg}");
    assert!(msg.contains("PeerMappingOverride=1"), "{msg}");
    let other = Mlx5Error::from_uar_mapping(IoMapError {
        code: CUDA_ERROR_NOT_SUPPORTED,
        message: "not supported".into(),
    });
    let msg = other.to_string();
    assert!(msg.contains("CUDA error 801"), "{msg}");
    assert!(!msg.contains("PeerMappingOverride"), "{msg}");
}

#[test]
fn no_dmabuf_and_no_peer_memory_names_both_remedies() {
    let err = Mlx5Error::gpu_registration(
        &DmaBufExportError {
            code: 1,
            message: "cuMemGetHandleForAddressRange: CUDA_ERROR_INVALID_VALUE".into(),
        },
        EFAULT,
    );
    let msg = err.to_string();
    assert!(msg.contains("CUDA_ERROR_INVALID_VALUE"), "{msg}");
    assert!(msg.contains("EFAULT (14)"), "{msg}");
    assert!(msg.contains("modprobe nvidia_peermem"), "{msg}");
    assert!(msg.contains("Linux >= 5.12"), "{msg}");
    assert!(msg.contains("rdma-core >= 43"), "{msg}");
    assert!(msg.contains("MLNX_OFED or DOCA-OFED"), "{msg}");
}

#[test]
fn device_errors_say_what_to_do() {
    let enosys = Mlx5Error::NoDevice {
        requested: None,
        available: vec![],
        errno: ENOSYS,
    };
    assert!(enosys.to_string().contains("load mlx5_ib and ib_uverbs"));
    let wrong = Mlx5Error::NoDevice {
        requested: Some("mlx5_9".into()),
        available: vec!["mlx5_0".into(), "mlx5_1".into()],
        errno: 0,
    };
    assert!(wrong
        .to_string()
        .starts_with("no RDMA device named `mlx5_9` (devices present: mlx5_0, mlx5_1)"));
    let not_mlx5 = Mlx5Error::NotMlx5 {
        device: "erdma_0".into(),
    };
    assert!(!not_mlx5.is_no_device());
    let msg = not_mlx5.to_string();
    assert!(
        msg.starts_with("RDMA device `erdma_0` is not an mlx5"),
        "{msg}"
    );
    assert!(msg.contains("--nic soft"), "{msg}");
    let atomics = Mlx5Error::MissingAtomics {
        missing: "8-byte compare-and-swap".into(),
    };
    assert!(atomics
        .to_string()
        .starts_with("the device lacks 8-byte compare-and-swap"));
    let gid = Mlx5Error::Gid {
        port: 1,
        index: 3,
        errno: 22,
    };
    assert!(gid.to_string().starts_with("GID index 3 of port 1"));
    assert!(gid.to_string().contains("show_gids"));
    let ah = Mlx5Error::AddressHandle {
        port: 1,
        global: false,
        errno: 22,
    };
    assert!(ah.to_string().contains("needs a global route header"));
    let devx = Mlx5Error::DevxUnavailable {
        device: "mlx5_0".into(),
        errno: EOPNOTSUPP,
    };
    assert!(devx.to_string().contains("EOPNOTSUPP (95)"));
}

/// An error CQE (mlx5's `mlx5_err_cqe` layout: syndromes at bytes 52..56, send opcode and
/// QPN at 56..60, WQE counter at 60..62, opcode and owner at 63).
fn error_cqe(syndrome: u8, vendor: u8, qpn: u32, wqe_counter: u16) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[54] = vendor;
    b[55] = syndrome;
    b[56..60].copy_from_slice(&((0x0a << 24) | qpn).to_be_bytes());
    b[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
    b[63] = 13 << 4; // requester error
    b
}

#[test]
fn a_qp_failing_its_first_wqe_reports_the_completion_and_the_likely_cause() {
    let Ok(Completion::Error(completion)) = parse_cqe(&error_cqe(0x02, 0x68, 0x1c4, 0)) else {
        panic!("an error CQE parses as an error completion");
    };
    assert_eq!(completion.syndrome, Some(Syndrome::LocalQpOperation));
    let err = Mlx5Error::first_wqe_failure(&completion).expect("WQE index 0 is the first");
    assert_eq!(err, Mlx5Error::FirstWqeFailed { completion });
    let Ok(Completion::Error(later)) = parse_cqe(&error_cqe(0x02, 0x68, 0x1c4, 5)) else {
        panic!("an error CQE parses as an error completion");
    };
    assert_eq!(Mlx5Error::first_wqe_failure(&later), None);
    let msg = err.to_string();
    assert!(
        msg.starts_with("queue pair 0x1c4 failed on its first WQE (index 0): syndrome 0x02"),
        "{msg}"
    );
    assert!(msg.contains("vendor syndrome 0x68"), "{msg}");
    assert!(msg.contains("zero-size RQ or an SRQ"), "{msg}");

    let Ok(Completion::Error(completion)) = parse_cqe(&error_cqe(0x15, 0x81, 7, 0)) else {
        panic!("an error CQE parses as an error completion");
    };
    let msg = Mlx5Error::FirstWqeFailed { completion }.to_string();
    assert!(msg.contains("TransportRetryExceeded"), "{msg}");
    assert!(msg.contains("the peer never answered"), "{msg}");
}

#[test]
fn command_names_follow_the_prm() {
    assert_eq!(command_name(0x400), "CREATE_CQ");
    assert_eq!(command_name(0x503), "INIT2RTR_QP");
    assert_eq!(command_name(0x710), "CREATE_DCT");
    assert_eq!(command_name(0x100), "QUERY_HCA_CAP");
}

#[test]
fn backend_errors_keep_their_type_or_their_remedy_in_the_control_plane_error() {
    use crate::nic::NicError;
    let no_device = Mlx5Error::NoDevice {
        requested: None,
        available: vec![],
        errno: 0,
    };
    let text = no_device.to_string();
    assert_eq!(
        NicError::from(no_device),
        NicError::NoDevice { reason: text }
    );
    let failure = PrmError::CommandError {
        command: "CREATE_CQ",
        status: CommandStatus::BadResourceState,
        syndrome: 7,
    };
    assert_eq!(
        NicError::from(Mlx5Error::Command {
            opcode: 0x400,
            error: failure.clone()
        }),
        NicError::Command(failure)
    );
    let refused = Mlx5Error::from_uar_mapping(IoMapError {
        code: CUDA_ERROR_NOT_PERMITTED,
        message: "operation not permitted".into(),
    });
    match NicError::from(refused) {
        NicError::Backend(backend) => {
            assert!(backend.is_unsupported());
            match backend.downcast_ref::<Mlx5Error>() {
                Some(Mlx5Error::UarMappingRefused { .. }) => {}
                other => panic!("expected UarMappingRefused, got {other:?}"),
            }
            assert!(backend.to_string().contains("PeerMappingOverride=1"));
        }
        other => panic!("expected Backend, got {other:?}"),
    }
    // An operation that failed keeps its type and every field through the control plane.
    let failed = NicError::from(Mlx5Error::Verbs {
        call: "ibv_alloc_pd",
        errno: 12,
    });
    match &failed {
        NicError::Backend(backend) => {
            assert!(!backend.is_unsupported());
            assert_eq!(
                backend.downcast_ref::<Mlx5Error>(),
                Some(&Mlx5Error::Verbs {
                    call: "ibv_alloc_pd",
                    errno: 12
                })
            );
        }
        other => panic!("expected Backend, got {other:?}"),
    }
    let source = std::error::Error::source(&failed).expect("the backend error is the source");
    assert!(source.downcast_ref::<Mlx5Error>().is_some());
}

#[test]
fn the_backend_opened_from_the_environment_reports_no_device_without_a_nic() {
    let result = Mlx5Backend::from_env();
    if sysfs_devices().is_empty() {
        let err = result.unwrap_err();
        assert!(matches!(err, Mlx5Error::NoDevice { .. }), "{err:?}");
    } else if let Err(e) = result {
        // With devices, "no device" only for a name that is not among them.
        let named = std::env::var(NIC_ENV).unwrap_or_default();
        if let Mlx5Error::NoDevice { requested, .. } = &e {
            assert_eq!(requested.as_deref(), Some(named.as_str()), "{e}");
            assert!(!sysfs_devices().contains(&named), "{e}");
        }
    }
}

#[test]
fn atomic_capabilities_need_8_byte_rc_atomics() {
    use crate::nic::{AtomicEndianness, DeviceCaps};
    let good = DeviceCaps {
        cqe_version: 1,
        compact_address_vector: true,
        log_max_qp_size: 15,
        log_max_cq_size: 22,
        max_send_wqe_bytes: 1024,
        atomic: true,
        standard_atomics: true,
        masked_atomics: true,
        atomic_sizes: 0x8 | 0x4,
        atomic_sizes_dc: 0x8 | 0x4,
        atomic_endianness: AtomicEndianness::BigEndian,
        dc: true,
        log_bf_reg_size: 9,
        log_max_msg: 30,
        log_max_ra_req_qp: 4,
        log_max_ra_res_qp: 4,
        log_max_ra_req_dc: 4,
        log_max_ra_res_dc: 4,
    };
    assert_eq!(check_atomic_capabilities(&good), Ok(()));
    // The CQE version is Device::open's check alone (tests/nic_control.rs), not this one.
    let old_cqe = DeviceCaps {
        cqe_version: 0,
        ..good
    };
    assert_eq!(check_atomic_capabilities(&old_cqe), Ok(()));
    let no_atomics = DeviceCaps {
        atomic: false,
        ..good
    };
    let err = check_atomic_capabilities(&no_atomics).unwrap_err();
    assert!(err.to_string().contains("`atomic` is 0"), "{err}");
    let four_only = DeviceCaps {
        atomic_sizes: 0x4,
        ..good
    };
    let err = check_atomic_capabilities(&four_only).unwrap_err();
    assert!(
        err.to_string()
            .contains("8-byte atomics on RC QPs (atomic_size_qp is 0x4, bit 3 clear)"),
        "{err}"
    );
}
