//! Borrowed record views of a [`FetchedBlob`]: its records read in place, the topic,
//! partition and offset once per blob, keys, values and headers as slices of the fetched
//! bytes. No reference count is taken and nothing is built or moved per record, which is
//! the floor of the owned paths (`ConsumerRecord`'s topic `Arc` and `Bytes` key and value,
//! `BlobRecord`'s `Bytes`).

use super::FetchedBlob;
use stellflow_proto::record::{BatchError, RecordView};

impl FetchedBlob {
    /// The next record not delivered before, as a borrowed [`RecordView`]: the records,
    /// batch checks and corrupt-remainder `Err` of iterating the blob ([`IntoIterator`]), in
    /// the same order, without a per-record reference count or record value. The view
    /// borrows the blob, so loop with `while let` and copy out what must outlive it. The
    /// topic, partition and offset are the blob's ([`FetchedBlob::topic`], …).
    ///
    /// Delivery and commits are exactly as for the owned iteration: taking the blob (the
    /// adapters' `poll_blobs`) delivered all of it, and its
    /// [`next_position`](FetchedBlob::next_position) is what (auto-)commit stores, however
    /// far the views are read.
    ///
    /// ```
    /// # use stellflow_sansio::FetchedBlob;
    /// # fn show(mut blob: FetchedBlob) {
    /// let (topic, offset) = (blob.topic().clone(), blob.offset());
    /// while let Some(record) = blob.next_view() {
    ///     match record {
    ///         Ok(r) => println!("{topic}@{offset}#{} {:?}", r.index_in_blob, r.value),
    ///         Err(e) => eprintln!("corrupt blob: {e}"),
    ///     }
    /// }
    /// # }
    /// ```
    #[inline]
    pub fn next_view(&mut self) -> Option<Result<RecordView<'_>, BatchError>> {
        if self.records.next_index() < self.skip
            && let Some(end) = self.skip_delivered()
        {
            return end;
        }
        self.records.next_view()
    }

    /// Walks past the records delivered before (a resumed blob): `None` once past them,
    /// else what ends the blob there (its end, or the error of a corrupt remainder).
    #[cold]
    #[inline(never)]
    #[allow(clippy::option_option)]
    fn skip_delivered(&mut self) -> Option<Option<Result<RecordView<'static>, BatchError>>> {
        while self.records.next_index() < self.skip {
            match self.records.next() {
                None => return Some(None),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Some(Some(Err(e))),
            }
        }
        None
    }
}
