use super::*;
use ttrpc::proto::MESSAGE_TYPE_REQUEST;

fn frame(stream_id: u32, payload: &[u8]) -> Vec<u8> {
    encode(
        MessageHeader::new_request(stream_id, payload.len() as u32),
        payload,
    )
}

fn whole(stream_id: u32, payload: &[u8]) -> Frame {
    Frame::Whole {
        header: MessageHeader::new_request(stream_id, payload.len() as u32),
        payload: payload.to_vec(),
    }
}

#[test]
fn frames_split_anywhere_come_out_whole_and_in_order() {
    let mut stream = frame(1, b"hello");
    stream.extend(frame(3, b""));
    stream.extend(frame(5, &[7; 300]));
    for chunk in [1, 3, 10, 11, 64, stream.len()] {
        let mut reader = FrameReader::new(1024);
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            reader.push(piece);
            got.extend(std::iter::from_fn(|| reader.next_frame()));
        }
        assert_eq!(
            got,
            vec![whole(1, b"hello"), whole(3, b""), whole(5, &[7; 300])],
            "chunk {chunk}"
        );
        assert_eq!(reader.pending(), 0);
    }
}

#[test]
fn an_oversized_frame_is_reported_once_and_its_payload_skipped() {
    let mut stream = frame(1, &[9; 100]);
    stream.extend(frame(3, b"next"));
    for chunk in [1, 7, 50, stream.len()] {
        let mut reader = FrameReader::new(64);
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            reader.push(piece);
            got.extend(std::iter::from_fn(|| reader.next_frame()));
        }
        let oversized = Frame::Oversized {
            header: MessageHeader::new_request(1, 100),
        };
        assert_eq!(got, vec![oversized, whole(3, b"next")], "chunk {chunk}");
    }
}

#[test]
fn a_huge_length_holds_no_memory() {
    let mut header: Vec<u8> = MessageHeader {
        length: u32::MAX,
        stream_id: 1,
        type_: MESSAGE_TYPE_REQUEST,
        flags: 0,
    }
    .into();
    header.extend_from_slice(&[0; 4096]);
    let mut reader = FrameReader::new(1 << 20);
    reader.push(&header);
    assert!(matches!(reader.next_frame(), Some(Frame::Oversized { .. })));
    let capacity = reader.buf.capacity();
    reader.push(&vec![0; 4 << 20]);
    assert_eq!(reader.next_frame(), None);
    assert_eq!(reader.pending(), 0);
    assert_eq!(
        reader.buf.capacity(),
        capacity,
        "skipped bytes were buffered"
    );
}

#[test]
fn a_truncated_frame_stays_pending() {
    let stream = frame(1, b"0123456789");
    let (frames, pending) = decode_all(&stream[..15], 1024);
    assert!(frames.is_empty());
    assert_eq!(pending, 15);
}
