use prost::Message;
use storage::{Labels, STALE_NAN_BITS, Sample};

use super::proto::*;
use super::*;

fn series(n: usize) -> Vec<Sample> {
    (0..n).map(|i| Sample::new(1_000 + i as i64 * 15_000, i as f64 * 0.5)).collect()
}

#[test]
fn negotiation_takes_the_first_supported_type() {
    assert_eq!(negotiate(&[]), Some(ResponseType::Samples));
    assert_eq!(negotiate(&[RESPONSE_SAMPLES]), Some(ResponseType::Samples));
    assert_eq!(negotiate(&[RESPONSE_STREAMED_XOR_CHUNKS]), Some(ResponseType::StreamedXorChunks));
    assert_eq!(
        negotiate(&[RESPONSE_STREAMED_XOR_CHUNKS, RESPONSE_SAMPLES]),
        Some(ResponseType::StreamedXorChunks)
    );
    assert_eq!(negotiate(&[RESPONSE_SAMPLES, RESPONSE_STREAMED_XOR_CHUNKS]), Some(ResponseType::Samples));
    assert_eq!(negotiate(&[7, RESPONSE_SAMPLES]), Some(ResponseType::Samples));
    assert_eq!(negotiate(&[7]), None);
}

#[test]
fn request_round_trips_and_respects_limits() {
    let request = ReadRequest {
        queries: vec![Query {
            start_timestamp_ms: -5,
            end_timestamp_ms: 10_000,
            matchers: vec![LabelMatcher {
                r#type: MATCH_RE,
                name: "__name__".into(),
                value: "up|down".into(),
            }],
            hints: Some(ReadHints {
                step_ms: 15_000,
                func: "rate".into(),
                range_ms: 300_000,
                ..Default::default()
            }),
        }],
        accepted_response_types: vec![RESPONSE_STREAMED_XOR_CHUNKS, RESPONSE_SAMPLES],
    };
    let body = encode_request(&request).unwrap();
    assert_eq!(decode_request(&body, &Limits::default()).unwrap(), request);

    let small = Limits { decoded_bytes_max: 4, ..Limits::default() };
    assert!(matches!(decode_request(&body, &small), Err(Error::LimitExceeded { .. })));
    assert!(matches!(decode_request(b"not snappy", &Limits::default()), Err(Error::Snappy(_))));
    let garbage = snap::raw::Encoder::new().compress_vec(&[0xff, 0xff, 0xff]).unwrap();
    assert!(matches!(decode_request(&garbage, &Limits::default()), Err(Error::Protobuf(_))));
}

#[test]
fn accepted_types_decode_packed_and_unpacked() {
    // Field 2, packed: tag 0x12, length 2, values 1 and 0.
    let packed = [0x12, 0x02, 0x01, 0x00];
    // Field 2, unpacked: tag 0x10 per value.
    let unpacked = [0x10, 0x01, 0x10, 0x00];
    for raw in [&packed[..], &unpacked[..]] {
        let request = ReadRequest::decode(raw).unwrap();
        assert_eq!(request.accepted_response_types, vec![RESPONSE_STREAMED_XOR_CHUNKS, RESPONSE_SAMPLES]);
    }
}

#[test]
fn matchers_convert_with_prometheus_semantics() {
    let pb = [
        LabelMatcher { r#type: MATCH_EQ, name: "job".into(), value: "api".into() },
        LabelMatcher { r#type: MATCH_NEQ, name: "env".into(), value: "dev".into() },
        LabelMatcher { r#type: MATCH_RE, name: "__name__".into(), value: "http_.+".into() },
        LabelMatcher { r#type: MATCH_NRE, name: "code".into(), value: "5..".into() },
    ];
    let ms = matchers(&pb).unwrap();
    assert_eq!(
        ms.iter().map(|m| m.op).collect::<Vec<_>>(),
        [MatchOp::Equal, MatchOp::NotEqual, MatchOp::Regex, MatchOp::NotRegex]
    );
    // Anchored: "http_requests_total" matches, "xhttp_a" does not.
    assert!(ms[2].matches("http_requests_total") && !ms[2].matches("xhttp_a"));
    assert!(ms[3].matches("200") && !ms[3].matches("503"));

    let bad_type = [LabelMatcher { r#type: 9, name: "a".into(), value: "b".into() }];
    assert!(matches!(matchers(&bad_type), Err(Error::InvalidMatcher(_))));
    let bad_regex = [LabelMatcher { r#type: MATCH_RE, name: "a".into(), value: "(".into() }];
    assert!(matches!(matchers(&bad_regex), Err(Error::InvalidMatcher(_))));
}

#[test]
fn a_querys_compiled_regexes_are_bounded() {
    // About 5.8 MB compiled each: two are fine, sixteen exceed the 64 MiB bound.
    let big = |n: usize| -> Vec<LabelMatcher> {
        (0..n)
            .map(|i| LabelMatcher {
                r#type: MATCH_NRE,
                name: format!("l{i}"),
                value: format!(r"(?:\pL{{120}}){i}"),
            })
            .collect()
    };
    assert_eq!(matchers(&big(2)).unwrap().len(), 2);
    match matchers(&big(16)) {
        Err(Error::InvalidMatcher(msg)) => assert!(msg.contains("MiB compiled"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn samples_response_keeps_value_bits() {
    let labels = Labels::from_pairs(&[("__name__", "m"), ("a", "b")]);
    let samples = vec![
        Sample::new(1, f64::from_bits(STALE_NAN_BITS)),
        Sample::new(2, f64::NAN),
        Sample::new(3, -0.0),
        Sample::new(4, 0.0),
    ];
    let response =
        ReadResponse { results: vec![QueryResult { timeseries: vec![time_series(&labels, &samples)] }] };
    let decoded = decode_samples_response(&encode_samples_response(&response).unwrap()).unwrap();
    assert_eq!(decoded, response);
    let ts = &decoded.results[0].timeseries[0];
    assert_eq!(ts.labels[0], Label { name: "__name__".into(), value: "m".into() });
    let bits: Vec<u64> = ts.samples.iter().map(|s| s.value_bits).collect();
    assert_eq!(bits, [STALE_NAN_BITS, f64::NAN.to_bits(), (-0.0f64).to_bits(), 0]);
}

#[test]
fn chunks_hold_at_most_120_samples_and_decode_back() {
    assert!(xor_chunks(&[]).is_empty());
    let samples = series(250);
    let chunks = xor_chunks(&samples);
    assert_eq!(chunks.len(), 3);
    let mut back = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        let got = xor::decode(&c.data).unwrap();
        assert_eq!(got.len(), [120, 120, 10][i]);
        assert_eq!(c.r#type, CHUNK_XOR);
        assert_eq!((c.min_time_ms, c.max_time_ms), (got[0].t, got[got.len() - 1].t));
        back.extend(got);
    }
    assert_eq!(back, samples);
}

#[test]
fn frames_split_a_series_like_prometheus() {
    let labels = labels_to_proto(&Labels::from_pairs(&[("__name__", "m"), ("job", "x")]));
    let labels_len: usize = labels.iter().map(Message::encoded_len).sum();
    let chunks = xor_chunks(&series(120 * 5));
    let chunk_len = chunks[0].encoded_len();
    // Room for just under two chunks after the labels: every frame closes after its second.
    let max = labels_len + 2 * chunk_len - 1;
    let mut frames = Vec::new();
    series_frames(3, labels.clone(), chunks.clone(), max, |f| {
        frames.push(f);
        Ok::<(), ()>(())
    })
    .unwrap();
    let body: Vec<u8> = frames.concat();
    let decoded = decode_chunked_body(&body, 1 << 20).unwrap();
    assert_eq!(decoded.iter().map(|r| r.chunked_series[0].chunks.len()).collect::<Vec<_>>(), [2, 2, 1]);
    for r in &decoded {
        assert_eq!(r.query_index, 3);
        assert_eq!(r.chunked_series.len(), 1);
        assert_eq!(r.chunked_series[0].labels, labels);
    }
    let all: Vec<Chunk> = decoded.into_iter().flat_map(|r| r.chunked_series[0].chunks.clone()).collect();
    assert_eq!(all, chunks);

    // The default frame size holds all five chunks in one frame; no chunks, no frame.
    let mut count = 0;
    series_frames(0, labels.clone(), chunks, DEFAULT_FRAME_BYTES_MAX, |_| {
        count += 1;
        Ok::<(), ()>(())
    })
    .unwrap();
    assert_eq!(count, 1);
    series_frames(0, labels, Vec::new(), DEFAULT_FRAME_BYTES_MAX, |_| Err(())).unwrap();
}

#[test]
fn framing_stops_when_the_receiver_does() {
    let labels = labels_to_proto(&Labels::from_pairs(&[("__name__", "m")]));
    let chunks = xor_chunks(&series(120 * 4));
    let mut sent = 0;
    let result = series_frames(0, labels, chunks, 1, |_| {
        sent += 1;
        if sent == 2 { Err("gone") } else { Ok(()) }
    });
    assert_eq!(result, Err("gone"));
    assert_eq!(sent, 2);
}
