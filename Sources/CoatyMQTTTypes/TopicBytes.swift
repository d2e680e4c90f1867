// Byte-level helpers of MQTT matching and validation, and of Coaty's topic parsing (package-wide): UTF-8 bytes
// without Foundation, regular expressions or allocation.

/// ASCII bytes used by the topic code (here and in CoatyCommunication's topic parsing); computed
/// and inlinable, so they fold to constants in the other module too.
package enum ASCII {
    @inlinable package static var slash: UInt8 { UInt8(ascii: "/") }
    @inlinable package static var colon: UInt8 { UInt8(ascii: ":") }
    @inlinable package static var plus: UInt8 { UInt8(ascii: "+") }
    @inlinable package static var hash: UInt8 { UInt8(ascii: "#") }
    @inlinable package static var dollar: UInt8 { UInt8(ascii: "$") }
    @inlinable package static var dash: UInt8 { UInt8(ascii: "-") }
    @inlinable package static var nul: UInt8 { 0 }
}

/// Runs `body` over the contiguous UTF-8 bytes of `string`, copying only for bridged strings.
// Inlinable: CoatyCommunication's topic parsing calls it for every received message.
@inlinable
package func withUTF8Bytes<S: StringProtocol, R>(_ string: S, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    if let result = string.utf8.withContiguousStorageIfAvailable(body) {
        return result
    }
    var copy = String(string)
    return copy.withUTF8(body)
}
