// Byte-level helpers of MQTT matching and validation: UTF-8 bytes without Foundation, regular expressions or
// allocation. CoatyCommunication's topic parsing keeps its own copy of these few lines on purpose: shared across the
// module boundary they were not inlined (callgrind: 2 M instructions per 4 000 events in ASCII getters alone).

/// ASCII bytes used by the topic code; `@usableFromInline` for the inlinable topic-name check.
@usableFromInline
enum ASCII {
    @inlinable static var slash: UInt8 { UInt8(ascii: "/") }
    @inlinable static var colon: UInt8 { UInt8(ascii: ":") }
    @inlinable static var plus: UInt8 { UInt8(ascii: "+") }
    @inlinable static var hash: UInt8 { UInt8(ascii: "#") }
    @inlinable static var dollar: UInt8 { UInt8(ascii: "$") }
    @inlinable static var dash: UInt8 { UInt8(ascii: "-") }
    @inlinable static var nul: UInt8 { 0 }
}

/// Runs `body` over the contiguous UTF-8 bytes of `string`, copying only for bridged strings.
@inlinable
func withUTF8Bytes<S: StringProtocol, R>(_ string: S, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    if let result = string.utf8.withContiguousStorageIfAvailable(body) {
        return result
    }
    var copy = String(string)
    return copy.withUTF8(body)
}
