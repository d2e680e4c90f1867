import CoatyModel

/// A compiled SQL LIKE pattern with Coaty JS semantics.
///
/// Coaty JS turns the pattern into an anchored JavaScript regular expression without flags, so
/// matching works on UTF-16 code units: `_` is one code unit and `%` any run of code units, neither
/// matching a line terminator (LF, CR, U+2028, U+2029). A backslash makes the next `_`, `%` or `\`
/// literal; a backslash before any other character is dropped; a trailing backslash is ignored.
/// Matching is case-sensitive.
struct LikePattern: Sendable, Hashable {
    enum Token: Sendable, Hashable {
        case literal(UInt16)
        case any
        case anySequence
    }

    let tokens: [Token]
    /// The whole pattern is literal: matching is string equality by code units.
    private let literal: [UInt16]?

    init(_ pattern: String) {
        var tokens: [Token] = []
        var isEscaped = false
        for scalar in pattern.unicodeScalars {
            switch scalar {
            case "\\":
                if isEscaped {
                    isEscaped = false
                    tokens.append(.literal(0x5C))
                } else {
                    isEscaped = true
                }
                continue
            case "_" where !isEscaped:
                tokens.append(.any)
            case "%" where !isEscaped:
                tokens.append(.anySequence)
            default:
                for unit in String(scalar).utf16 { tokens.append(.literal(unit)) }
                isEscaped = false
            }
        }
        self.tokens = tokens
        var units: [UInt16] = []
        for token in tokens {
            guard case .literal(let u) = token else {
                literal = nil
                return
            }
            units.append(u)
        }
        literal = units
    }

    @inline(__always)
    private static func isLineTerminator(_ u: UInt16) -> Bool {
        u == 0x0A || u == 0x0D || u == 0x2028 || u == 0x2029
    }

    /// Whether `string` matches the whole pattern.
    func matches(_ string: String) -> Bool {
        if let literal { return string.utf16.elementsEqual(literal) }
        if tokens.count < 64 { return matchesSmall(string) }
        return matchesLarge(string)
    }

    /// NFA simulation with one bit per pattern position (state `tokens.count` accepts).
    private func matchesSmall(_ string: String) -> Bool {
        var anyMask: UInt64 = 0
        var starMask: UInt64 = 0
        for (i, token) in tokens.enumerated() {
            switch token {
            case .any: anyMask |= 1 << UInt64(i)
            case .anySequence: starMask |= 1 << UInt64(i)
            case .literal: break
            }
        }
        let accept: UInt64 = 1 << UInt64(tokens.count)
        @inline(__always) func closure(_ s: UInt64) -> UInt64 {
            var s = s
            while true {
                let next = s | ((s & starMask) << 1)
                if next == s { return s }
                s = next
            }
        }
        var state = closure(1)
        for unit in string.utf16 {
            var literalMask: UInt64 = 0
            for (i, token) in tokens.enumerated() {
                if case .literal(let u) = token, u == unit { literalMask |= 1 << UInt64(i) }
            }
            var next = (state & literalMask) << 1
            if !Self.isLineTerminator(unit) {
                next |= (state & anyMask) << 1
                next |= state & starMask
            }
            state = closure(next)
            if state == 0 { return false }
        }
        return state & accept != 0
    }

    /// The same simulation with a boolean per position, for long patterns.
    private func matchesLarge(_ string: String) -> Bool {
        let n = tokens.count
        var state = [Bool](repeating: false, count: n + 1)
        var next = state
        func close(_ s: inout [Bool]) {
            for i in 0..<n where s[i] {
                if case .anySequence = tokens[i] { s[i + 1] = true }
            }
        }
        state[0] = true
        close(&state)
        for unit in string.utf16 {
            for i in 0...n { next[i] = false }
            var alive = false
            let terminator = Self.isLineTerminator(unit)
            for i in 0..<n where state[i] {
                switch tokens[i] {
                case .literal(let u) where u == unit:
                    next[i + 1] = true
                case .any where !terminator:
                    next[i + 1] = true
                case .anySequence where !terminator:
                    next[i] = true
                default:
                    break
                }
            }
            close(&next)
            swap(&state, &next)
            for s in state where s { alive = true }
            if !alive { return false }
        }
        return state[n]
    }
}
