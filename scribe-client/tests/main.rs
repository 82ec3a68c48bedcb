//! Integration tests of the client library against the real service, over
//! TCP, TLS and in-process (one binary, one module per concern).

mod it;
