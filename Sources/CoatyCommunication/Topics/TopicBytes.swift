// Byte-level helpers of topic parsing and building (ASCII and withUTF8Bytes come from CoatyMQTTTypes). Everything here works
// on UTF-8 bytes without Foundation, regular expressions or allocation.

import CoatyFilter
import CoatyModel
import CoatyMQTTTypes

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
