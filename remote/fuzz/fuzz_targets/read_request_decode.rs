//! Fuzzes remote-read request decoding and what the server does next with a request: response
//! type negotiation and matcher conversion. It must never panic; only decoding errors come out
//! of the decoder, only matcher errors out of the conversion; a regex matcher is accepted only
//! if its pattern is a regex on its own (so the anchoring around it cannot be escaped); and an
//! accepted request survives a round trip through our client side.

#![no_main]

use libfuzzer_sys::fuzz_target;
use remote::read::{self, proto};
use remote::{Error, Limits};
use storage::MatchOp;

fuzz_target!(|data: &[u8]| {
    // The first byte: odd means the rest is the (snappy) body as sent; even means the rest is
    // the protobuf, which the harness compresses so mutations reach the message directly.
    let Some((&mode, rest)) = data.split_first() else { return };
    let limits = Limits { decoded_bytes_max: 1 << 20, ..Limits::default() };
    let body = if mode & 1 == 1 {
        rest.to_vec()
    } else {
        match snap::raw::Encoder::new().compress_vec(rest) {
            Ok(b) => b,
            Err(_) => return,
        }
    };
    let request = match read::decode_request(&body, &limits) {
        Ok(r) => r,
        Err(Error::Snappy(_) | Error::Protobuf(_) | Error::LimitExceeded { .. }) => return,
        Err(e) => panic!("unexpected error kind: {e:?}"),
    };
    let types = &request.accepted_response_types;
    let known = [proto::RESPONSE_SAMPLES, proto::RESPONSE_STREAMED_XOR_CHUNKS];
    assert_eq!(read::negotiate(types).is_some(), types.is_empty() || types.iter().any(|t| known.contains(t)));
    for query in &request.queries {
        match read::matchers(&query.matchers) {
            Ok(ms) => {
                assert_eq!(ms.len(), query.matchers.len());
                for (m, pb) in ms.iter().zip(&query.matchers) {
                    assert_eq!(m.name, pb.name);
                    assert_eq!(m.value, pb.value);
                    let op = [MatchOp::Equal, MatchOp::NotEqual, MatchOp::Regex, MatchOp::NotRegex]
                        [usize::try_from(pb.r#type).expect("known matcher types are 0..=3")];
                    assert_eq!(m.op, op);
                    if matches!(op, MatchOp::Regex | MatchOp::NotRegex) {
                        // Go's syntax, as Prometheus sends it: the pattern in the regex crate's
                        // syntax must be a regex on its own.
                        let go = storage::matcher::go_syntax::translate(&pb.value);
                        assert!(
                            go.is_ok_and(|t| regex::Regex::new(&t.pattern).is_ok()),
                            "regex matcher {:?} accepted though it is no regex on its own",
                            pb.value
                        );
                    }
                    // Exercise the matcher; a regex matcher agrees with itself negated.
                    let _ = m.matches("");
                    let _ = m.matches(&pb.value);
                }
            }
            Err(Error::InvalidMatcher(_)) => {}
            Err(e) => panic!("unexpected matcher error kind: {e:?}"),
        }
    }
    let again = read::encode_request(&request).expect("a decoded request re-encodes");
    assert_eq!(read::decode_request(&again, &Limits::default()).expect("our own encoding decodes"), request);
});
