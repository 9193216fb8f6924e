//! RoCE v2 against rdma-core 56.1, and which oracle covers which RoCE field.
//!
//! * The address vector of a RoCE path (what a DC initiator carries, what the software NIC
//!   builds for a DC target, what the control plane reads the destination MAC from):
//!   rdma-core's own `mlx5_create_ah` for an Ethernet port, with the source GID's type and
//!   the neighbour's MAC answered by the shim instead of sysfs and netlink
//!   (`roce_address_vectors_are_mlx5_create_ahs`, `software_nic_roce_address_vectors_are_mlx5_create_ahs`):
//!   `stat_rate_sl` with the RoCE service-level bits, the UDP source port in the LID
//!   field, `rmac`, `tclass`, `hop_limit`, the GRH bit clear, the source GID index, the flow
//!   label, `rgid`.
//! * The UDP source port of a flow label: rdma-core's `ibv_flow_label_to_udp_sport`
//!   (`udp_source_ports_are_rdma_cores`). The flow label of a connection without one
//!   (`rdma_calc_flow_label`, a product of the two QPNs) is the Linux kernel's and has no
//!   rdma-core oracle: `ibgda::nic::roce`'s unit test checks a value worked by hand.
//! * INIT2RTR's RoCE fields (`rmac_47_32` / `rmac_31_0`, `rgid_rip`, `src_addr_index`,
//!   `hop_limit`, `udp_sport`, `tclass`, `dscp`, `eth_prio`): every one is set at random and
//!   compared with `DEVX_SET` on `mlx5_ifc.h` in `prm_commands`'s `prm_init2rtr_devx_set`
//!   and with scapy's `SwAds` in `prm_modify_qp_scapy`; the constructor the control plane
//!   builds its RoCE path with (`AddressPath::roce`) is compared with rdma-core's own
//!   `dr_devx_modify_qp_init2rtr` for RoCE v1 and v2 in `prm_dr_init2rtr`.

#[test]
#[cfg_attr(
    not(ibgda_oracle),
    ignore = "rdma-core oracle not built: run scripts/rdma-core.sh"
)]
fn roce_address_vectors_are_mlx5_create_ahs() {
    #[cfg(ibgda_oracle)]
    checks::roce_address_vectors_are_mlx5_create_ahs();
}

#[test]
#[cfg_attr(
    not(ibgda_oracle),
    ignore = "rdma-core oracle not built: run scripts/rdma-core.sh"
)]
fn software_nic_roce_address_vectors_are_mlx5_create_ahs() {
    #[cfg(ibgda_oracle)]
    checks::software_nic_roce_address_vectors_are_mlx5_create_ahs();
}

#[test]
#[cfg_attr(
    not(ibgda_oracle),
    ignore = "rdma-core oracle not built: run scripts/rdma-core.sh"
)]
fn udp_source_ports_are_rdma_cores() {
    #[cfg(ibgda_oracle)]
    checks::udp_source_ports_are_rdma_cores();
}

#[cfg(ibgda_oracle)]
mod checks {
    use ibgda::nic::{roce, Backend, Gid, SoftNic};
    use ibgda::softnic::Fabric;
    use ibgda::wqe::{FullAddressVector, Grh, LinkAddress};
    use ibgda_rdma_core_oracle::roce::{create_ah, flow_label_to_udp_sport, RoceAh};
    use zerocopy::IntoBytes;

    const CASES: u32 = 4_000;

    /// xorshift64, seeded as the other oracle tests are (`IBGDA_PRM_SEED`).
    struct Rng(u64);
    impl Rng {
        fn new(test: &str) -> Self {
            let seed = std::env::var("IBGDA_PRM_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0x2545_f491_4f6c_dd1d);
            eprintln!("oracle: {test}: seed {seed} (IBGDA_PRM_SEED)");
            Self(seed | 1)
        }
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn bytes<const N: usize>(&mut self) -> [u8; N] {
            let mut b = [0u8; N];
            for x in &mut b {
                *x = self.next() as u8;
            }
            b
        }
    }

    /// Bytes 12..48 of an address vector: what an address handle holds (bytes 0..12, the
    /// DC key and the DCT number, are patched in per WQE; `level2_wqe` compares those).
    fn path_bytes(av: &[u8]) -> &[u8] {
        &av[12..48]
    }

    pub fn roce_address_vectors_are_mlx5_create_ahs() {
        let mut rng = Rng::new("roce_address_vectors_are_mlx5_create_ahs");
        for case in 0..CASES {
            let roce_v2 = rng.next() % 4 != 0;
            // A RoCE v2 AH without a flow label gets a random UDP port: give one.
            let mut flow_label = (rng.next() & 0xf_ffff) as u32;
            if roce_v2 && flow_label == 0 {
                flow_label = 1;
            }
            let args = RoceAh {
                dgid: rng.bytes(),
                mac: rng.bytes(),
                roce_v2: roce_v2.into(),
                sgid_index: rng.next() as u8,
                flow_label,
                hop_limit: rng.next() as u8,
                traffic_class: rng.next() as u8,
                sl: (rng.next() & 7) as u8,
                static_rate: 0,
            };
            let theirs = create_ah(&args).expect("mlx5_create_ah on a RoCE port");
            let ours = FullAddressVector {
                dct: 0,
                dc_key: 0,
                link: LinkAddress::Roce {
                    udp_source_port: if roce_v2 {
                        roce::udp_source_port(flow_label)
                    } else {
                        0
                    },
                    sl: args.sl,
                    static_rate: 0,
                    mac: args.mac,
                    grh: Grh {
                        sgid_index: args.sgid_index,
                        flow_label,
                        traffic_class: args.traffic_class,
                        hop_limit: args.hop_limit,
                        dgid: args.dgid,
                    },
                },
            }
            .encode()
            .expect("in-range fields");
            assert_eq!(
                path_bytes(ours.segment().as_bytes()),
                path_bytes(&theirs),
                "case {case}: {args:?}"
            );
        }
        eprintln!("oracle: roce_address_vectors_are_mlx5_create_ahs: {CASES} cases");
    }

    pub fn software_nic_roce_address_vectors_are_mlx5_create_ahs() {
        // The software NIC's answer to Backend::address_vector on a RoCE port against the
        // AH rdma-core makes from the same GID, source index and MAC (hop limit 64, no
        // flow label). rdma-core draws the UDP port of such an AH at random; the software
        // NIC derives one: only its range is compared.
        let fabric = Fabric::new();
        let mut cases = 0;
        for host in 1..=4u8 {
            let mac = [0x02, 0x10, 0x20, 0x30, 0x40, host];
            let nic = SoftNic::open_roce(
                &fabric,
                mac,
                roce::kernel_gid_table(mac, &[[10, 0, 0, host], [172, 16, host, 1]]),
            )
            .unwrap();
            let pd = nic.alloc_pd().unwrap();
            let port = nic.port_attributes().clone();
            for (index, entry) in port.gids.iter().enumerate() {
                let index = index as u8;
                let dgid: Gid = entry.gid;
                let ours = nic.address_vector(&pd, &port, index, dgid).unwrap();
                let theirs = create_ah(&RoceAh {
                    dgid: dgid.0,
                    mac,
                    roce_v2: 1,
                    sgid_index: index,
                    flow_label: 0,
                    hop_limit: 64,
                    traffic_class: 0,
                    sl: 0,
                    static_rate: 0,
                })
                .unwrap();
                let (ours, theirs) = (ours.as_bytes(), &theirs[..]);
                assert_eq!(ours[12..14], theirs[12..14], "stat_rate_sl, fl_mlid");
                assert_eq!(
                    ours[16..48],
                    theirs[16..48],
                    "rmac, tclass, hop limit, GRH, rgid"
                );
                let port_of = |b: &[u8]| u16::from_be_bytes([b[14], b[15]]);
                assert!(roce::UDP_SOURCE_PORTS.contains(&port_of(ours)));
                assert!(roce::UDP_SOURCE_PORTS.contains(&port_of(theirs)));
                cases += 1;
            }
        }
        eprintln!("oracle: software_nic_roce_address_vectors_are_mlx5_create_ahs: {cases} cases");
    }

    pub fn udp_source_ports_are_rdma_cores() {
        let mut rng = Rng::new("udp_source_ports_are_rdma_cores");
        let edges = [0u32, 1, 0x3fff, 0x4000, 0xf_c000, 0xf_ffff];
        let random = (0..CASES).map(|_| (rng.next() & 0xf_ffff) as u32);
        let mut cases = 0;
        for fl in edges.into_iter().chain(random) {
            assert_eq!(
                roce::udp_source_port(fl),
                flow_label_to_udp_sport(fl),
                "flow label {fl:#x}"
            );
            cases += 1;
        }
        eprintln!("oracle: udp_source_ports_are_rdma_cores: {cases} cases");
    }
}
