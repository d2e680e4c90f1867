// Byte-level helpers shared by topic parsing and building. Everything here works on UTF-8 bytes without
// Foundation, regular expressions or allocation. (CoatyMQTTTypes has its own ASCII and withUTF8Bytes: these stay in
// this module so that the hot topic parsing inlines them.) Everything here works
// on UTF-8 bytes without Foundation, regular expressions or allocation.

import CoatyFilter
import CoatyModel

/// ASCII bytes used by the topic code.
enum ASCII {
    static let slash = UInt8(ascii: "/")
    static let colon = UInt8(ascii: ":")
    static let plus = UInt8(ascii: "+")
    static let hash = UInt8(ascii: "#")
    static let dollar = UInt8(ascii: "$")
    static let dash = UInt8(ascii: "-")
    static let nul: UInt8 = 0
}

/// Runs `body` over the contiguous UTF-8 bytes of `string`, copying only for bridged strings.
@inline(__always)
func withUTF8Bytes<S: StringProtocol, R>(_ string: S, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    if let result = string.utf8.withContiguousStorageIfAvailable(body) {
        return result
    }
    var copy = String(string)
    return copy.withUTF8(body)
}

/// Whether `bytes` is a lowercase RFC 4122 version 4 UUID string:
/// `xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx` with lowercase hex digits and variant `V` in `89ab`.
@inline(__always)
func isLowercaseUUIDv4(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard bytes.count == 36 else { return false }
    for i in 0..<36 {
        let b = bytes[i]
        switch i {
        case 8, 13, 18, 23:
            if b != ASCII.dash { return false }
        case 14:
            if b != UInt8(ascii: "4") { return false }
        case 19:
            // Variant 10xx: 8, 9, a, b.
            if !(b == UInt8(ascii: "8") || b == UInt8(ascii: "9") || b == UInt8(ascii: "a") || b == UInt8(ascii: "b")) {
                return false
            }
        default:
            if !((b &- UInt8(ascii: "0")) < 10 || (b &- UInt8(ascii: "a")) < 6) { return false }
        }
    }
    return true
}

/// Whether `string` is a lowercase RFC 4122 version 4 UUID string.
func isLowercaseUUIDv4<S: StringProtocol>(_ string: S) -> Bool {
    withUTF8Bytes(string) { isLowercaseUUIDv4($0) }
}

/// Whether a namespace, event filter, channel id, operation name or object type is usable in a
/// Coaty topic: non-empty and free of NUL, `+`, `#` and `/`.
@inline(__always)
func isValidTopicComponent(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard !bytes.isEmpty else { return false }
    for b in bytes where b == ASCII.slash || b == ASCII.plus || b == ASCII.hash || b == ASCII.nul {
        return false
    }
    return true
}

/// Whether `string` is usable as a Coaty topic component (see the byte variant).
func isValidTopicComponent<S: StringProtocol>(_ string: S) -> Bool {
    withUTF8Bytes(string) { isValidTopicComponent($0) }
}

/// Whether the bytes at `start..<end` of `bytes` equal the ASCII string `literal`.
@inline(__always)
func bytesEqual(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ literal: StaticString) -> Bool {
    let count = literal.utf8CodeUnitCount
    guard end - start == count else { return false }
    let lit = literal.utf8Start
    for i in 0..<count where bytes[start + i] != lit[i] {
        return false
    }
    return true
}
