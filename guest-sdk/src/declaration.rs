//! Where a registration is declared: static constructors run in link order, not in
//! the order the attributes are written, which Kopf's semantics depend on.

/// Where an attribute is written: file, line, column.
pub(crate) type Source = (&'static str, u32, u32);

/// Sorts `entries` by where they are declared, keeping equal ones in order. An
/// insertion sort: a guest declares a few dozen entries at most, and the standard
/// library's stable sort would add 3.6 KB to every guest (`examples/minimal` is
/// bounded at 128 KiB).
pub(crate) fn sort<T>(entries: &mut [T], source: impl Fn(&T) -> Source) {
    for sorted in 1..entries.len() {
        let mut at = sorted;
        while at > 0 && source(&entries[at - 1]) > source(&entries[at]) {
            entries.swap(at - 1, at);
            at -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn entries_are_ordered_by_file_line_and_column_and_equal_ones_keep_their_order() {
        let mut entries = [
            (("b.rs", 1, 1), 'a'),
            (("a.rs", 9, 5), 'b'),
            (("a.rs", 9, 1), 'c'),
            (("a.rs", 2, 1), 'd'),
            (("a.rs", 9, 1), 'e'),
        ];
        super::sort(&mut entries, |e| e.0);
        let order: String = entries.iter().map(|e| e.1).collect();
        assert_eq!(order, "dceba");
    }
}
