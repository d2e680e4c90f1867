#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Short-lived C copies of Swift strings for one C call (the MQTT client's libmosquitto calls,
/// the test broker's `posix_spawn`): each copy lives until ``free()``.
package struct CStringArena {
    private var allocations: [UnsafeMutableRawPointer] = []

    /// An empty arena.
    package init() {}

    /// A NUL-terminated copy of `string`, or `nil` for `nil`.
    package mutating func copy(_ string: String?) -> UnsafePointer<CChar>? {
        guard let string else { return nil }
        guard let copy = strdup(string) else { return nil }
        allocations.append(UnsafeMutableRawPointer(copy))
        return UnsafePointer(copy)
    }

    /// A copy of `bytes`.
    package mutating func copy(bytes: [UInt8]) -> UnsafePointer<UInt8>? {
        let memory = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, bytes.count))
        memory.initialize(from: bytes, count: bytes.count)
        allocations.append(UnsafeMutableRawPointer(memory))
        return UnsafePointer(memory)
    }

    /// Frees every copy.
    package mutating func free() {
        for allocation in allocations { allocation.deallocate() }
        allocations.removeAll()
    }
}
