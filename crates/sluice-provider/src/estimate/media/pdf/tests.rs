//! Tests of the PDF page count, and a builder of minimal PDFs for tests elsewhere.

use super::super::b64::tests::encode;
use super::*;

/// A minimal well-formed PDF with `n` pages, each carrying `text`.
pub(crate) fn pdf(n: usize, text: &str) -> Vec<u8> {
    let mut body = String::from("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n");
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 3 + i)).collect();
    body += &format!("2 0 obj << /Type /Pages /Kids [{}] /Count {n} >> endobj\n", kids.join(" "));
    for i in 0..n {
        let stream = format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET");
        body += &format!(
            "{} 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents << /Length {} >> stream\n{stream}\nendstream >> endobj\n",
            3 + i,
            stream.len()
        );
    }
    body += "trailer << /Root 1 0 R >>\n%%EOF\n";
    body.into_bytes()
}

fn count(bytes: &[u8]) -> u64 {
    pages(&Base64::new(&encode(bytes)))
}

#[test]
fn counts_page_objects_not_the_tree() {
    assert_eq!(count(&pdf(1, "hello")), 1);
    assert_eq!(count(&pdf(7, "hello")), 7);
    assert_eq!(count(b"<</Type/Page>> <</Type  /Page/X>> <</Type /Pages>> /PageMode"), 2);
}

#[test]
fn matches_across_chunks_count_once() {
    let filler = "x".repeat(2_000);
    let doc = pdf(300, &filler); // ~700 KB: many chunk boundaries
    assert!(doc.len() > 10 * CHUNK);
    assert_eq!(count(&doc), 300);
    for shift in 0..OVERLAP {
        let mut doc = vec![b' '; CHUNK - shift];
        doc.extend_from_slice(b"/Type /Page ");
        assert_eq!(count(&doc), 1, "shift {shift}");
    }
}

#[test]
fn without_page_objects_the_size_decides() {
    let compressed = vec![0x55u8; 240 * 1024];
    assert_eq!(count(&compressed), 15);
    assert_eq!(count(b"%PDF"), 1);
    assert_eq!(pages(&Base64::new("not base64!")), pages_from_size(8));
}
