//! Arbitrary bytes as a PRM command input or output, as the software NIC and the control
//! plane receive them. Byte 0 picks the decoder, the rest is the command.
//!
//! Properties: no decoder panics; a command that decodes re-encodes to exactly the bytes
//! it was decoded from (decoding is strict: every set bit belongs to a field it read), and
//! decodes again to the same value; an output that decodes re-encodes to bytes that
//! decode to the same value.
#![no_main]

use ibgda::nic::prm::*;
use libfuzzer_sys::fuzz_target;

fn command<C: Command + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Ok(decoded) = C::decode(bytes) {
        let encoded = decoded.encode().expect("a decoded command re-encodes");
        assert_eq!(encoded.len(), C::INPUT_BYTES);
        assert_eq!(
            &encoded[..],
            &bytes[..C::INPUT_BYTES],
            "{}: re-encoding differs",
            C::NAME
        );
        assert_eq!(C::decode(&encoded).as_ref(), Ok(&decoded));
    }
}

fn output<O: CommandOutput + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    match O::decode(bytes) {
        Ok(decoded) => {
            let encoded = decoded.encode().expect("a decoded output re-encodes");
            assert_eq!(O::decode(&encoded).as_ref(), Ok(&decoded));
        }
        Err(PrmError::CommandError { command, .. }) => assert_eq!(command, O::COMMAND),
        Err(_) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    match selector % 27 {
        0 => command::<QueryHcaCap>(bytes),
        1 => command::<AllocUar>(bytes),
        2 => command::<DeallocUar>(bytes),
        3 => command::<CreateCq>(bytes),
        4 => command::<DestroyCq>(bytes),
        5 => command::<CreateQp>(bytes),
        6 => command::<DestroyQp>(bytes),
        7 => command::<Rst2InitQp>(bytes),
        8 => command::<Init2RtrQp>(bytes),
        9 => command::<Rtr2RtsQp>(bytes),
        10 => command::<CreateDct>(bytes),
        11 => command::<DestroyDct>(bytes),
        12 => {
            if let Ok(caps) = QueryHcaCapOutput::decode(CapabilityType::General, bytes) {
                let encoded = caps.encode().expect("decoded caps re-encode");
                assert_eq!(
                    QueryHcaCapOutput::decode(CapabilityType::General, &encoded),
                    Ok(caps)
                );
            }
        }
        13 => {
            if let Ok(caps) = QueryHcaCapOutput::decode(CapabilityType::Atomic, bytes) {
                let encoded = caps.encode().expect("decoded caps re-encode");
                assert_eq!(
                    QueryHcaCapOutput::decode(CapabilityType::Atomic, &encoded),
                    Ok(caps)
                );
            }
        }
        14 => output::<AllocUarOutput>(bytes),
        15 => output::<DeallocUarOutput>(bytes),
        16 => output::<CreateCqOutput>(bytes),
        17 => output::<CreateQpOutput>(bytes),
        18 => output::<CreateDctOutput>(bytes),
        19 => output::<Rst2InitQpOutput>(bytes),
        20 => output::<Init2RtrQpOutput>(bytes),
        21 => output::<Rtr2RtsQpOutput>(bytes),
        22 => output::<DestroyQpOutput>(bytes),
        23 => command::<Qp2Err>(bytes),
        24 => command::<Qp2Rst>(bytes),
        25 => output::<Qp2ErrOutput>(bytes),
        _ => {
            let _ = check_status("fuzz", bytes);
        }
    }
});
