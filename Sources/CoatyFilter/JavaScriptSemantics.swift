// The JavaScript semantics Coaty JS's ObjectMatcher relies on, over JSONValue:
// strict and deep equality, deep containment, and the abstract relational comparison
// (`<`, `<=`, `>`, `>=`) with its type conversions. `nil` stands for JavaScript `undefined`.

import CoatyModel

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

enum JavaScript {
    // MARK: Equality and containment

    /// JavaScript `===` on JSON values: primitives by value, strings by code units; arrays and
    /// objects are never strictly equal (they are distinct references).
    static func strictEquals(_ a: JSONValue?, _ b: JSONValue?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (.null?, .null?): return true
        case (.bool(let x)?, .bool(let y)?): return x == y
        case (.string(let x)?, .string(let y)?): return sameCodeUnits(x, y)
        case (.int(let x)?, .int(let y)?): return x == y
        case (let x?, let y?) where x.isNumber && y.isNumber: return x == y
        default: return false
        }
    }

    /// Whether two strings have the same code units (JavaScript string `===`; Swift's `==` would
    /// also equate canonically equivalent strings).
    ///
    /// Equal UTF-8 bytes are equal code units (both encode the same scalars), so this is one
    /// `memcmp`: the byte loop it replaces cost 398 instructions for a 25-byte object type (40 %
    /// of a Query's per-object matching), this 94 (callgrind). CoatyModel's `memcmpBytes` would do
    /// as well in principle, but across the module boundary it is a call to an uninlined loop: 205.
    static func sameCodeUnits(_ a: String, _ b: String) -> Bool {
        let x = a.utf8
        let y = b.utf8
        guard x.count == y.count else { return false }
        // Native strings (every parsed one) lend their bytes without a copy or a retain.
        let same = x.withContiguousStorageIfAvailable { px in
            y.withContiguousStorageIfAvailable { py in
                guard let p = px.baseAddress, let q = py.baseAddress else { return true }
                return memcmp(p, q, px.count) == 0
            }
        }
        if let same, let same { return same }
        return x.elementsEqual(y)
    }

    /// Coaty's `equals`: deep structural equality; arrays in order, objects by key set.
    static func deepEquals(_ a: JSONValue?, _ b: JSONValue?) -> Bool {
        switch (a, b) {
        case (.array(let x)?, .array(let y)?):
            guard x.count == y.count else { return false }
            for i in x.indices where !deepEquals(x[i], y[i]) { return false }
            return true
        case (.object(let x)?, .object(let y)?):
            guard x.count == y.count else { return false }
            for (key, value) in zip(x.keys, x.values) {
                guard let other = y[key], deepEquals(value, other) else { return false }
            }
            return true
        default:
            return strictEquals(a, b)
        }
    }

    /// The TypeError Coaty JS's `contains` throws when asked whether an object contains `null`.
    struct TypeError: Error {}

    /// Coaty's `contains`: whether `a` contains `b` structurally (see ``ObjectFilterOperator/contains``).
    /// - Throws: ``TypeError`` where Coaty JS throws one: when an object is tested for containing
    ///   `null`, unless the evaluation short-circuits before (JavaScript's evaluation order is kept).
    static func deepContains(_ a: JSONValue?, _ b: JSONValue?) throws(TypeError) -> Bool {
        try contains(a, b, isTopLevel: true)
    }

    private static func contains(_ x: JSONValue?, _ y: JSONValue?, isTopLevel: Bool) throws(TypeError) -> Bool {
        switch x {
        case .array(let xs)?:
            guard case .array(let ys)? = y else {
                // An array on top level may contain a primitive value.
                switch y {
                case .array?, .object?: return false
                default: return isTopLevel && xs.contains { strictEquals($0, y) }
                }
            }
            // y.every(yv => x.some(xv => contains(xv, yv)))
            for yv in ys {
                var found = false
                for xv in xs where try contains(xv, yv, isTopLevel: false) {
                    found = true
                    break
                }
                if !found { return false }
            }
            return true
        case .object(let xo)?:
            switch y {
            case .object(let yo)?:
                // Object.keys(y).every(k => x.hasOwnProperty(k) && contains(x[k], y[k]))
                if let order = objectKeyOrder(yo) {
                    for i in order {
                        guard let xv = xo[yo.keys[i]], try contains(xv, yo.values[i], isTopLevel: false) else {
                            return false
                        }
                    }
                } else {
                    for i in objectKeyOrderWithIndexKeys(yo) {
                        guard let xv = xo[yo.keys[i]], try contains(xv, yo.values[i], isTopLevel: false) else {
                            return false
                        }
                    }
                }
                return true
            case .array(let ys)?:
                // Object.keys of an array are its indices.
                for i in ys.indices {
                    guard let xv = xo[String(i)], try contains(xv, ys[i], isTopLevel: false) else { return false }
                }
                return true
            case .null?:
                // typeof null is "object", and Object.keys(null) throws.
                throw TypeError()
            default:
                return false
            }
        default:
            return strictEquals(x, y)
        }
    }

    /// The order of `Object.keys` when no key can be integer-like (the insertion order), else `nil`.
    static func objectKeyOrder(_ object: JSONObject) -> Range<Int>? {
        for key in object.keys {
            if let first = key.utf8.first, first >= 48, first <= 57 { return nil }
        }
        return object.keys.indices
    }

    /// The order of `Object.keys` when some keys may be integer-like.
    static func objectKeyOrderWithIndexKeys(_ object: JSONObject) -> [Int] {
        var indexKeys: [(Int, Int)] = []
        var others: [Int] = []
        for (i, key) in object.keys.enumerated() {
            if let n = PropertyPath.arrayIndex(key) { indexKeys.append((n, i)) } else { others.append(i) }
        }
        if indexKeys.isEmpty { return others }
        return indexKeys.sorted { $0.0 < $1.0 }.map(\.1) + others
    }

    /// Coaty's `includes`: whether the array `array` has an element deep-equal to `value`;
    /// `nil` when `array` is not an array (Coaty JS throws a TypeError).
    static func includes(_ array: JSONValue?, _ value: JSONValue?) -> Bool? {
        guard case .array(let elements)? = array else { return nil }
        return elements.contains { deepEquals($0, value) }
    }

    // MARK: Relational comparison

    /// A JavaScript primitive as produced by ToPrimitive on a JSON value.
    enum Primitive {
        case undefined
        case null
        case bool(Bool)
        case int(Int64)
        case double(Double)
        case string(String)
    }

    static func toPrimitive(_ value: JSONValue?) -> Primitive {
        switch value {
        case nil: .undefined
        case .null?: .null
        case .bool(let b)?: .bool(b)
        case .int(let i)?: .int(i)
        case .double(let d)?: .double(d)
        case .string(let s)?: .string(s)
        case .array(let a)?: .string(arrayToString(a))
        case .object?: .string("[object Object]")
        }
    }

    static func toNumber(_ p: Primitive) -> Double {
        switch p {
        case .undefined: .nan
        case .null: 0
        case .bool(let b): b ? 1 : 0
        case .int(let i): Double(i)
        case .double(let d): d
        case .string(let s): stringToNumber(s)
        }
    }

    /// The abstract relational comparison `x < y`: `nil` when undefined (a NaN was involved).
    static func lessThan(_ x: JSONValue?, _ y: JSONValue?) -> Bool? {
        let px = toPrimitive(x)
        let py = toPrimitive(y)
        switch (px, py) {
        case (.string(let a), .string(let b)):
            return a.utf16.lexicographicallyPrecedes(b.utf16)
        case (.int(let a), .int(let b)):
            return a < b
        default:
            let nx = toNumber(px)
            let ny = toNumber(py)
            if nx.isNaN || ny.isNaN { return nil }
            return nx < ny
        }
    }

    /// JavaScript `x < y`.
    static func less(_ x: JSONValue?, _ y: JSONValue?) -> Bool { lessThan(x, y) == true }
    /// JavaScript `x <= y`.
    static func lessOrEqual(_ x: JSONValue?, _ y: JSONValue?) -> Bool { lessThan(y, x) == false }
    /// JavaScript `x > y`.
    static func greater(_ x: JSONValue?, _ y: JSONValue?) -> Bool { lessThan(y, x) == true }
    /// JavaScript `x >= y`.
    static func greaterOrEqual(_ x: JSONValue?, _ y: JSONValue?) -> Bool { lessThan(x, y) == false }

    // MARK: Conversions

    /// `Array.prototype.toString`: elements joined by commas, `null` and `undefined` as empty.
    static func arrayToString(_ array: [JSONValue]) -> String {
        var result = ""
        for (i, element) in array.enumerated() {
            if i > 0 { result += "," }
            switch element {
            case .null: break
            case .bool(let b): result += b ? "true" : "false"
            case .int(let n): result += String(n)
            case .double(let d): result += numberToString(d)
            case .string(let s): result += s
            case .array(let a): result += arrayToString(a)
            case .object: result += "[object Object]"
            }
        }
        return result
    }

    /// `Number.prototype.toString()` for a finite double: the shortest round-trip digits in
    /// JavaScript's notation (`1e+21`, `1e-7`, `0.000001`, `123`).
    static func numberToString(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
        if d == 0 { return "0" }
        let sign = d < 0 ? "-" : ""
        // Swift prints the shortest round-trip digits too; take digits and exponent from it.
        let text = "\(d.magnitude)"
        var mantissa = Substring(text)
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            mantissa = text[..<e]
            exponent = Int(text[text.index(after: e)...]) ?? 0
        }
        var digits = ""
        var pointPosition = mantissa.count
        if let dot = mantissa.firstIndex(of: ".") {
            pointPosition = mantissa.distance(from: mantissa.startIndex, to: dot)
        }
        for c in mantissa where c != "." { digits.append(c) }
        // Strip leading zeros (adjusting the point) and trailing zeros.
        while digits.first == "0" {
            digits.removeFirst()
            pointPosition -= 1
        }
        while digits.last == "0" { digits.removeLast() }
        let k = digits.count
        let n = pointPosition + exponent  // value = 0.digits × 10^n
        if k <= n && n <= 21 {
            return sign + digits + String(repeating: "0", count: n - k)
        }
        if 0 < n && n <= 21 {
            let split = digits.index(digits.startIndex, offsetBy: n)
            return sign + digits[..<split] + "." + digits[split...]
        }
        if -6 < n && n <= 0 {
            return sign + "0." + String(repeating: "0", count: -n) + digits
        }
        let e = n - 1
        let expText = e < 0 ? "e-\(-e)" : "e+\(e)"
        if k == 1 { return sign + digits + expText }
        return sign + digits.prefix(1) + "." + digits.dropFirst() + expText
    }

    /// JavaScript's StringToNumber: trimmed decimal, `Infinity`, or `0x`/`0o`/`0b` integer
    /// literals; the empty string is 0; anything else is NaN.
    static func stringToNumber(_ string: String) -> Double {
        let scalars = Array(string.unicodeScalars)
        var start = 0
        var end = scalars.count
        while start < end, isJSWhitespace(scalars[start]) { start += 1 }
        while end > start, isJSWhitespace(scalars[end - 1]) { end -= 1 }
        if start == end { return 0 }
        let body = String(String.UnicodeScalarView(scalars[start..<end]))
        switch body {
        case "Infinity", "+Infinity": return .infinity
        case "-Infinity": return -.infinity
        default: break
        }
        let utf8 = Array(body.utf8)
        if utf8.count > 2, utf8[0] == UInt8(ascii: "0") {
            let radix: Int? =
                switch utf8[1] {
                case UInt8(ascii: "x"), UInt8(ascii: "X"): 16
                case UInt8(ascii: "o"), UInt8(ascii: "O"): 8
                case UInt8(ascii: "b"), UInt8(ascii: "B"): 2
                default: nil
                }
            if let radix {
                var value = 0.0
                for c in utf8[2...] {
                    guard let digit = Int(String(UnicodeScalar(c)), radix: radix) else { return .nan }
                    value = value * Double(radix) + Double(digit)
                }
                return value
            }
        }
        guard isDecimalLiteral(utf8) else { return .nan }
        return Double(body) ?? .nan
    }

    /// StrDecimalLiteral without `Infinity`: `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`.
    private static func isDecimalLiteral(_ s: [UInt8]) -> Bool {
        var i = 0
        func digits() -> Int {
            let from = i
            while i < s.count, s[i] >= 48, s[i] <= 57 { i += 1 }
            return i - from
        }
        if i < s.count, s[i] == UInt8(ascii: "+") || s[i] == UInt8(ascii: "-") { i += 1 }
        var mantissaDigits = digits()
        if i < s.count, s[i] == UInt8(ascii: ".") {
            i += 1
            mantissaDigits += digits()
        }
        guard mantissaDigits > 0 else { return false }
        if i < s.count, s[i] == UInt8(ascii: "e") || s[i] == UInt8(ascii: "E") {
            i += 1
            if i < s.count, s[i] == UInt8(ascii: "+") || s[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { return false }
        }
        return i == s.count
    }

    /// JavaScript WhiteSpace and LineTerminator code points (what `String.prototype.trim` removes).
    static func isJSWhitespace(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F,
            0x3000, 0xFEFF:
            true
        default:
            false
        }
    }
}
