import Testing

/// The suites against the real Coaty JS 2.4.1, one test at a time: each test starts a mosquitto
/// and Node.js processes, and running several side by side on a busy machine only slows them all.
@Suite("Interop with Coaty JS 2.4.1", .serialized, .timeLimit(.minutes(1)), .coatyJSPeerAvailable)
struct CoatyJSInterop {}
