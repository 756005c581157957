//! Record data: the v1 batch, the SRFB envelope and the blob splitter (PROTOCOL.md §4).
