//! SRFB batch validation: malformed batches rejected with 14 before the partition lookup,
//! valid ones (gzip, unchecked record count, empty payload) stored verbatim (PROTOCOL.md §4.2,
//! §4.4, §3.3).

use crate::conformance::*;

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "srfb_malformed_batches_rejected_14",
            section: "4.2, 3.3",
            run: srfb_malformed,
        },
        Case {
            name: "srfb_valid_gzip_and_unchecked_count_accepted",
            section: "4.2, 4.4",
            run: srfb_valid,
        },
    ]
}

fn srfb_malformed(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let good = Srfb::plain(b"payload!");
    let gz = Srfb::gzip(b"gzip payload");
    let mut two = good.encode();
    two.extend_from_slice(&good.encode());
    let mut srfb_zeros = b"SRFB".to_vec();
    srfb_zeros.extend_from_slice(&[0; 32]);
    let mut thirty_six = good.encode();
    thirty_six.truncate(36);
    let mut flipped = good.clone();
    flipped.crc ^= 1;
    let crc32c_instead = Srfb {
        crc: crc32c(&good.payload),
        ..good.clone()
    };
    let not_gzip = Srfb {
        compression: 1,
        ..good.clone()
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("4-byte blob \"SRFB\"", b"SRFB".to_vec()),
        ("36-byte blob", thirty_six),
        ("SRFB + 32 zero bytes", srfb_zeros),
        (
            "version 0",
            Srfb {
                version: 0,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "version 2",
            Srfb {
                version: 2,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "compression 2",
            Srfb {
                compression: 2,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "compression -1",
            Srfb {
                compression: -1,
                ..good.clone()
            }
            .encode(),
        ),
        ("gzip flag over a non-gzip payload", not_gzip.encode()),
        (
            "recordCount 0",
            Srfb {
                record_count: 0,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "recordCount -1",
            Srfb {
                record_count: -1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "uncompressedLength + 1",
            Srfb {
                uncompressed_length: good.uncompressed_length + 1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "gzip uncompressedLength - 1",
            Srfb {
                uncompressed_length: gz.uncompressed_length - 1,
                ..gz.clone()
            }
            .encode(),
        ),
        (
            "uncompressedLength -1",
            Srfb {
                uncompressed_length: -1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "payloadLength + 1",
            Srfb {
                payload_length: good.payload_length + 1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "payloadLength - 1",
            Srfb {
                payload_length: good.payload_length - 1,
                ..good.clone()
            }
            .encode(),
        ),
        (
            "payloadLength -1",
            Srfb {
                payload_length: -1,
                ..good.clone()
            }
            .encode(),
        ),
        ("two SRFB batches in one blob", two),
        ("flipped CRC bit", flipped.encode()),
        ("CRC-32C instead of CRC-32", crc32c_instead.encode()),
    ];
    for (what, blob) in &cases {
        expect_rejected(&produce_raw(&mut c, &t, 0, blob)?, 14, what)?;
    }
    // Rejected before the partition lookup: the topic was never created.
    assert_topic_unknown(&mut c, &t)?;
    Ok(())
}

fn srfb_valid(ctx: &Ctx) -> CaseResult {
    let mut c = ctx.conn()?;
    let t = ctx.name("t");
    let gz = Srfb::gzip(b"hello gzip, hello gzip, hello gzip").encode();
    let big_gz = Srfb::gzip(&vec![b'z'; 70_000]).encode(); // two stored blocks
    let counted = Srfb {
        record_count: 99,
        ..Srfb::plain(b"one record")
    }
    .encode();
    let empty_payload = Srfb::plain(b"").encode();
    for (i, blob) in [&gz, &big_gz, &counted, &empty_payload].iter().enumerate() {
        ensure_eq!(
            produce_ok(&mut c, &t, 0, blob)?,
            i as i64,
            "valid SRFB blob {i}"
        );
    }
    // Stored and served as sent: the gzip payload is not decompressed for consumers.
    let f = fetch(&mut c, &t, 0, 0, 1)?;
    ensure!(records(&f)? == gz, "gzip blob returned verbatim");
    let f = fetch(&mut c, &t, 0, 3, 1)?;
    ensure!(
        records(&f)? == empty_payload,
        "37-byte SRFB blob returned verbatim"
    );
    Ok(())
}
