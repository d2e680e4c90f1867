public import Synchronization

/// A mutual-exclusion lock around a value: `Synchronization.Mutex`, made visible to
/// ThreadSanitizer in builds compiled with `-DCOATY_TSAN`.
///
/// `Mutex` takes its lock in the (uninstrumented) standard library, so ThreadSanitizer sees no
/// happens-before edge between two critical sections on different threads and reports every
/// access to the guarded value as a race (`Scripts/tsan-mutex-repro` proves it: eight threads
/// append inside `withLock`, the count is exact, and TSan reports a race). With `COATY_TSAN`,
/// each critical section tells TSan that it acquires and releases the value's address
/// (`__tsan_acquire`/`__tsan_release`), so TSan reports only real races. Without it, this is
/// `Mutex` itself: the same code, inlined.
///
/// ```swift
/// let counter = CoatyMutex(0)
/// counter.withLock { $0 += 1 }
/// ```
public struct CoatyMutex<Value: ~Copyable>: ~Copyable, Sendable {
    @usableFromInline let mutex: Mutex<Value>

    /// A lock around `initialValue`.
    /// - Parameter initialValue: the value.
    @inlinable
    public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// Runs `body` with exclusive access to the value.
    /// - Parameter body: reads or changes the value.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws.
    @inlinable
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        #if COATY_TSAN
            // A mutex never moves (it is address-only): its address identifies it. Taken from
            // the `let`, not from the value, whose every access TSan checks.
            let address = withUnsafePointer(to: mutex) { UnsafeRawPointer($0) }
            return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
                coatyTSanAcquire(address)
                defer { coatyTSanRelease(address) }
                return try body(&value)
            }
        #else
            return try mutex.withLock(body)
        #endif
    }
}

#if COATY_TSAN
    /// ThreadSanitizer's annotation: the calling thread acquires `address` (pairs with the last
    /// release of it on any thread).
    @usableFromInline
    @_silgen_name("__tsan_acquire")
    func coatyTSanAcquire(_ address: UnsafeRawPointer)

    /// ThreadSanitizer's annotation: the calling thread releases `address`.
    @usableFromInline
    @_silgen_name("__tsan_release")
    func coatyTSanRelease(_ address: UnsafeRawPointer)
#endif
