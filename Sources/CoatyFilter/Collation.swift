import CoatyModel

/// The string collation Coaty filters use for ordering and for Less/Greater/Between on strings.
///
/// Coaty JS compares strings with `Intl.Collator` (the default locale, which on a server is the
/// ICU root collation). `CoatyCollation` reproduces that order deterministically, without any
/// locale data:
///
/// 1. **Primary** level, compared first over the whole string, ignoring case and accents:
///    control and format characters are ignored; then whitespace < punctuation
///    (`_ - , ; : ! ? . ' " ( ) [ ] { } @ * / \ & # %`) < symbols (`` ` ^ + < = > | ~ ``) <
///    currency (`$`) < digits < letters (`a` … `z`, Latin letters with strokes and ligatures after
///    their base letter, other scripts after Latin by code point of their lowercase form).
/// 2. **Secondary** level: accents (`e` < `é`), precomposed or combining.
/// 3. **Tertiary** level: lowercase before uppercase at the first difference.
///
/// So `"abc" < "Abc" < "ABc" < "abd"`, and `"a" < "B"`.
/// Strings equal at all three levels compare equal (`compare` returns 0) even when their code
/// points differ, as with `Intl.Collator`.
public enum CoatyCollation {
    /// Compares two strings by the Coaty collation.
    /// - Parameters:
    ///   - a: the first string.
    ///   - b: the second string.
    /// - Returns: a negative number when `a` sorts first, 0 when equal, a positive number otherwise.
    public static func compare(_ a: String, _ b: String) -> Int {
        if let result = compareASCII(a, b) { return result }
        return sortKey(a).compare(to: sortKey(b))
    }

    /// The sort key of `string`: comparing sort keys gives the same result as ``compare(_:_:)``.
    ///
    /// Computing keys once is faster when one string is compared many times (ordering, a filter operand).
    /// - Parameter string: the string.
    /// - Returns: its sort key.
    public static func sortKey(_ string: String) -> CollationSortKey {
        if let key = asciiSortKey(string) { return key }
        var primaries: [UInt32] = []
        var secondaries: [UInt32] = []
        var tertiaries: [UInt32] = []
        primaries.reserveCapacity(string.utf8.count)
        for scalar in string.unicodeScalars {
            appendElements(of: scalar) { p, s, t in
                if p != 0 { primaries.append(p) }
                secondaries.append(s)
                tertiaries.append(t)
            }
        }
        var weights = primaries
        weights.reserveCapacity(primaries.count + secondaries.count + tertiaries.count + 2)
        weights.append(levelSeparator)
        weights.append(contentsOf: secondaries)
        weights.append(levelSeparator)
        weights.append(contentsOf: tertiaries)
        return CollationSortKey(weights: weights)
    }

    /// The sort key of an ASCII string in one pass; `nil` when the string is not ASCII.
    static func asciiSortKey(_ string: String) -> CollationSortKey? {
        var string = string
        return string.withUTF8 { bytes -> CollationSortKey? in
            let table = asciiPrimary
            var count = 0
            for byte in bytes {
                guard byte < 0x80 else { return nil }
                if table[Int(byte)] != 0 { count += 1 }
            }
            let weights = [UInt32](unsafeUninitializedCapacity: 3 * count + 2) { buffer, initialized in
                var p = 0
                var t = 2 * count + 2
                for byte in bytes {
                    let primary = table[Int(byte)]
                    guard primary != 0 else { continue }
                    buffer[p] = primary
                    buffer[count + 1 + p] = commonSecondary
                    buffer[t] = byte >= 65 && byte <= 90 ? upperTertiary : lowerTertiary
                    p += 1
                    t += 1
                }
                buffer[count] = levelSeparator
                buffer[2 * count + 1] = levelSeparator
                initialized = 3 * count + 2
            }
            return CollationSortKey(weights: weights)
        }
    }

    // MARK: Weights

    static let levelSeparator: UInt32 = 1
    static let commonSecondary: UInt32 = 5
    static let lowerTertiary: UInt32 = 5
    static let upperTertiary: UInt32 = 6
    static let variantTertiary: UInt32 = 7

    static let spacePrimary: UInt32 = 0x110
    static let punctuationBase: UInt32 = 0x1000
    static let otherPunctuationBase: UInt32 = 0x2000
    static let otherCurrencyBase: UInt32 = 0x40_1000
    static let symbolBase: UInt32 = 0x20_0000
    static let otherSymbolBase: UInt32 = 0x20_1000
    static let currencyBase: UInt32 = 0x40_0000
    static let digitBase: UInt32 = 0x60_0000
    static let otherNumberBase: UInt32 = 0x60_1000
    static let latinBase: UInt32 = 0x80_0000
    static let otherLetterBase: UInt32 = 0x100_0000
    static let unassignedBase: UInt32 = 0x200_0000

    /// Punctuation in the order of the ICU root collation (ASCII, Latin-1 and General Punctuation).
    static let punctuationOrder =
        "\u{203E}_\u{2017}-\u{2010}\u{2011}\u{2012}\u{2013}\u{2014}\u{2015}\u{2053},;\u{204F}:!\u{203C}\u{2049}\u{A1}?\u{2048}\u{2047}\u{BF}\u{203D}.\u{2024}\u{2025}\u{2026}\u{B7}\u{2055}\u{2056}\u{2058}\u{2059}\u{205A}\u{205B}\u{205C}\u{205D}\u{205E}'\u{2018}\u{2019}\u{201A}\u{201B}\u{2039}\u{203A}\u{22}\u{201C}\u{201D}\u{201E}\u{201F}\u{AB}\u{BB}()[]{}\u{2045}\u{2046}\u{2016}\u{A7}\u{B6}\u{204B}@*\u{204E}\u{2051}/\u{5C}&\u{204A}#%\u{2030}\u{2031}\u{2020}\u{2021}\u{2022}\u{2023}\u{2027}\u{2043}\u{204C}\u{204D}\u{2032}\u{2033}\u{2034}\u{2057}\u{2035}\u{2036}\u{2037}\u{2038}\u{203B}\u{203F}\u{2054}\u{2040}\u{2050}\u{2041}\u{2042}"
    /// Symbols in the order of the ICU root collation.
    static let symbolOrder =
        "`\u{B4}^\u{AF}\u{A8}\u{B8}\u{B0}\u{A9}\u{AE}+\u{B1}\u{F7}\u{D7}<=>\u{AC}|\u{A6}~\u{2052}\u{2044}"
    /// Currency signs in the order of the ICU root collation.
    static let currencyOrder =
        "\u{A4}\u{A2}$\u{A3}\u{A5}\u{20A0}\u{20A1}\u{20A2}\u{20A3}\u{20A4}\u{20A5}\u{20A6}\u{20A9}\u{20AA}\u{20AB}\u{20AC}\u{20AD}\u{20AE}\u{20AF}\u{20B0}\u{20B1}\u{20B2}\u{20B3}\u{20B4}\u{20B5}\u{20B6}\u{20B7}\u{20B8}\u{20B9}\u{20BA}\u{20BB}\u{20BC}\u{20BD}\u{20BE}\u{20BF}\u{20C0}\u{20A7}\u{20A8}"

    /// Primary weights of the punctuation, symbols and currency signs listed above.
    static let rankedPrimaries: [UInt32: UInt32] = {
        var table: [UInt32: UInt32] = [:]
        for (order, base) in [
            (punctuationOrder, punctuationBase), (symbolOrder, symbolBase), (currencyOrder, currencyBase),
        ] {
            for (i, scalar) in order.unicodeScalars.enumerated() { table[scalar.value] = base + UInt32(i) }
        }
        return table
    }()

    /// Primary weights of the ASCII characters (0 = ignorable).
    static let asciiPrimary: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 128)
        for (i, c) in [9, 10, 11, 12, 13].enumerated() { table[c] = 0x101 + UInt32(i) }
        table[32] = spacePrimary
        for c in 33..<127 {
            if let p = rankedPrimaries[UInt32(c)] { table[c] = p }
        }
        for d in 0..<10 { table[48 + d] = digitBase + UInt32(d) }
        for l in 0..<26 {
            table[65 + l] = latinPrimary(l)
            table[97 + l] = latinPrimary(l)
        }
        return table
    }()

    @inline(__always)
    static func latinPrimary(_ letterIndex: Int) -> UInt32 { latinBase + UInt32(letterIndex) * 8 }

    /// Secondary weights of combining accents, in the order of the Unicode collation algorithm.
    static func accentWeight(_ mark: UInt32) -> UInt32 {
        switch mark {
        case 0x301: 0x10  // acute
        case 0x300: 0x11  // grave
        case 0x306: 0x12  // breve
        case 0x302: 0x13  // circumflex
        case 0x30C: 0x14  // caron
        case 0x30A: 0x15  // ring above
        case 0x308: 0x16  // diaeresis
        case 0x30B: 0x17  // double acute
        case 0x303: 0x18  // tilde
        case 0x307: 0x19  // dot above
        case 0x338: 0x1A  // long solidus overlay (ø)
        case 0x327: 0x1B  // cedilla
        case 0x328: 0x1C  // ogonek
        case 0x304: 0x1D  // macron
        case 0x335: 0x1E  // short stroke overlay (đ ħ)
        case 0x337: 0x1F  // short solidus overlay (ł)
        case 0x309: 0x20  // hook above
        case 0x31B: 0x21  // horn
        case 0x323: 0x22  // dot below
        case 0x326: 0x23  // comma below
        case 0x331: 0x24  // macron below
        default: 0x100 + (mark & 0xFFFF)
        }
    }

    /// Decompositions of U+00C0…U+017F: base letter and accent code.
    /// Accent codes: ' acute, ` grave, u breve, ^ circumflex, v caron, o ring, : diaeresis,
    /// " double acute, ~ tilde, . dot above, , cedilla, ; ogonek, - macron, 0 none,
    /// | long solidus (ø), = short stroke (đ ħ), * short solidus (ł), ! eth,
    /// / a letter of its own sorting right after the base letter;
    /// a space marks "not here" (symbols, and ligatures handled before the table).
    private static let latinDecompositions: [UInt8] = Array(
        ("A`A'A^A~A:Ao  C,E`E'E^E:I`I'I^I:D!N~O`O'O^O~O:  O|U`U'U^U:Y'Z/ssa`a'a^a~a:ao  c,"
            + "e`e'e^e:i`i'i^i:d!n~o`o'o^o~o:  o|u`u'u^u:y'z/y:A-a-AuauA;a;C'c'C^c^C.c.CvcvDvdv"
            + "D=d=E-e-EueuE.e.E;e;EvevG^g^GuguG.g.G,g,H^h^H=h=I~i~I-i-IuiuI;i;I.i/    J^j^K,k,"
            + "q/L'l'L,l,LvlvL.l.L*l*N'n'N,n,Nvnvn'N/n/O-o-OuouO\"o\"    R'r'R,r,RvrvS's'S^s^S,s,"
            + "SvsvT,t,TvtvT/t/U~u~U-u-UuuuUouoU\"u\"U;u;W^w^Y^y^Y:Z'z'Z.z.Zvzvs0").utf8
    )

    /// Greek and Cyrillic letters in the order of the ICU root collation (lowercase).
    static let greekOrder = "αβγδεζηθικλμνξοπρστυφχψω"
    static let cyrillicOrder = "абвгдђеєжзѕиіјйклљмнњопрстћуфхцчџшщъыьэюя"
    /// Lowercase Greek and Cyrillic letters that ICU sorts as a base letter with accents.
    static let greekAndCyrillicDecompositions: [(UInt32, String, [UInt32])] = [
        (0x3AC, "α", [0x301]), (0x3AD, "ε", [0x301]), (0x3AE, "η", [0x301]), (0x3AF, "ι", [0x301]),
        (0x3CC, "ο", [0x301]), (0x3CD, "υ", [0x301]), (0x3CE, "ω", [0x301]), (0x3CA, "ι", [0x308]),
        (0x3CB, "υ", [0x308]), (0x390, "ι", [0x308, 0x301]), (0x3B0, "υ", [0x308, 0x301]), (0x3C2, "σ", []),
        (0x450, "е", [0x300]), (0x451, "е", [0x308]), (0x453, "г", [0x301]), (0x457, "і", [0x308]),
        (0x45C, "к", [0x301]), (0x45D, "и", [0x300]), (0x45E, "у", [0x306]),
    ]

    /// Primary weight and accents of lowercase Greek and Cyrillic letters.
    static let greekAndCyrillic: [UInt32: (primary: UInt32, marks: [UInt32])] = {
        var table: [UInt32: (primary: UInt32, marks: [UInt32])] = [:]
        for (i, scalar) in greekOrder.unicodeScalars.enumerated() {
            table[scalar.value] = (otherLetterBase + 0x3B0 + UInt32(i), [])
        }
        for (i, scalar) in cyrillicOrder.unicodeScalars.enumerated() {
            table[scalar.value] = (otherLetterBase + 0x400 + UInt32(i), [])
        }
        for (letter, base, marks) in greekAndCyrillicDecompositions {
            if let b = base.unicodeScalars.first, let entry = table[b.value] {
                table[letter] = (entry.primary, marks)
            }
        }
        return table
    }()

    private static func accentCode(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "'"): 0x301
        case UInt8(ascii: "`"): 0x300
        case UInt8(ascii: "u"): 0x306
        case UInt8(ascii: "^"): 0x302
        case UInt8(ascii: "v"): 0x30C
        case UInt8(ascii: "o"): 0x30A
        case UInt8(ascii: ":"): 0x308
        case UInt8(ascii: "\""): 0x30B
        case UInt8(ascii: "~"): 0x303
        case UInt8(ascii: "."): 0x307
        case UInt8(ascii: ","): 0x327
        case UInt8(ascii: ";"): 0x328
        case UInt8(ascii: "-"): 0x304
        case UInt8(ascii: "|"): 0x338  // long solidus overlay: ø
        case UInt8(ascii: "="): 0x335  // short stroke overlay: đ ħ
        case UInt8(ascii: "*"): 0x337  // short solidus overlay: ł
        case UInt8(ascii: "!"): 0x10F0  // eth: a d variant sorting after đ
        default: nil
        }
    }

    @inline(__always)
    private static func letterElement(_ c: UInt8, tertiary: UInt32? = nil) -> (UInt32, UInt32, UInt32) {
        let isUpper = c >= 65 && c <= 90
        let index = Int(isUpper ? c - 65 : c - 97)
        return (latinPrimary(index), commonSecondary, tertiary ?? (isUpper ? upperTertiary : lowerTertiary))
    }

    /// Calls `emit(primary, secondary, tertiary)` for each collation element of `scalar`.
    static func appendElements(of scalar: Unicode.Scalar, _ emit: (UInt32, UInt32, UInt32) -> Void) {
        let v = scalar.value
        if v < 0x80 {
            let p = asciiPrimary[Int(v)]
            guard p != 0 else { return }
            let isUpper = v >= 65 && v <= 90
            emit(p, commonSecondary, isUpper ? upperTertiary : lowerTertiary)
            return
        }
        if v == 0x20A7 || v == 0x20A8 {
            // ₧ and ₨ expand to the letters "Pts" and "Rs"
            let letters: [Int] = v == 0x20A7 ? [15, 19, 18] : [17, 18]
            for (i, letter) in letters.enumerated() {
                emit(latinPrimary(letter), commonSecondary, i == 0 ? upperTertiary + 2 : variantTertiary)
            }
            return
        }
        if let p = rankedPrimaries[v] {
            emit(p, commonSecondary, lowerTertiary)
            return
        }
        switch v {
        case 0xC6, 0xE6, 0x152, 0x153, 0x132, 0x133:
            // ligatures Æ æ Œ œ Ĳ ĳ expand to two letters
            let isUpper = v == 0xC6 || v == 0x152 || v == 0x132
            let first = v == 0xC6 || v == 0xE6 ? 0 : (v == 0x152 || v == 0x153 ? 14 : 8)
            let second = v == 0x132 || v == 0x133 ? 9 : 4
            let tertiary = isUpper ? upperTertiary : lowerTertiary
            emit(latinPrimary(first), commonSecondary, tertiary)
            emit(latinPrimary(second), commonSecondary, tertiary)
            return
        case 0xBC, 0xBD, 0xBE:
            // vulgar fractions ¼ ½ ¾ expand to digit, fraction slash, digit
            let numerator: UInt32 = v == 0xBE ? 3 : 1
            let denominator: UInt32 = v == 0xBD ? 2 : 4
            emit(digitBase + numerator, commonSecondary, variantTertiary)
            emit(rankedPrimaries[0x2044] ?? symbolBase, commonSecondary, variantTertiary)
            emit(digitBase + denominator, commonSecondary, variantTertiary)
            return
        case 0xB5:
            // micro sign: a variant of Greek mu
            emit(greekAndCyrillic[0x3BC]?.primary ?? otherLetterBase + 0x3BC, commonSecondary, variantTertiary)
            return
        case 0xAA, 0xBA:
            // ordinal indicators ª º are variants of a and o
            emit(latinPrimary(v == 0xAA ? 0 : 14), commonSecondary, variantTertiary)
            return
        default:
            break
        }
        if v >= 0xC0 && v <= 0x17F {
            let i = Int(v - 0xC0) * 2
            let base = latinDecompositions[i]
            let mark = latinDecompositions[i + 1]
            if base != UInt8(ascii: " ") {
                if base == UInt8(ascii: "s") && mark == UInt8(ascii: "s") {
                    // ß: an expansion to "ss" that sorts after "ss" at the tertiary level
                    let e = letterElement(base, tertiary: variantTertiary)
                    emit(e.0, e.1, e.2)
                    emit(e.0, e.1, e.2)
                    return
                }
                var e = letterElement(base)
                if mark == UInt8(ascii: "/") {
                    e.0 += 1
                    emit(e.0, e.1, e.2)
                } else if mark == UInt8(ascii: "0") {
                    emit(e.0, e.1, variantTertiary)
                } else {
                    emit(e.0, e.1, e.2)
                    if let accent = accentCode(mark) { emit(0, accentWeight(accent), lowerTertiary) }
                }
                return
            }
        }
        let properties = scalar.properties
        switch properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark:
            emit(0, accentWeight(v), lowerTertiary)
        case .control, .format, .surrogate:
            return
        case .spaceSeparator, .lineSeparator, .paragraphSeparator:
            // no-break space after the other space variants, as in ICU
            emit(spacePrimary, commonSecondary, v == 0xA0 ? variantTertiary + 1 : variantTertiary)
        case .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
            .initialPunctuation, .finalPunctuation, .otherPunctuation:
            emit(otherPunctuationBase + v, commonSecondary, lowerTertiary)
        case .mathSymbol, .modifierSymbol, .otherSymbol:
            emit(otherSymbolBase + v, commonSecondary, lowerTertiary)
        case .currencySymbol:
            emit(otherCurrencyBase + v, commonSecondary, lowerTertiary)
        case .decimalNumber:
            if let n = properties.numericValue, n >= 0, n <= 9, Double(Int(n)) == n {
                emit(digitBase + UInt32(n), commonSecondary, lowerTertiary)
            } else {
                emit(otherNumberBase + v, commonSecondary, lowerTertiary)
            }
        case .letterNumber, .otherNumber:
            if let n = properties.numericValue, n >= 0, n <= 9, Double(Int(n)) == n {
                emit(digitBase + UInt32(n), commonSecondary, variantTertiary)
            } else {
                emit(otherNumberBase + v, commonSecondary, lowerTertiary)
            }
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter:
            let isUpper = properties.changesWhenLowercased
            let tertiary = isUpper ? upperTertiary : lowerTertiary
            var lower = v
            let mapping = properties.lowercaseMapping.unicodeScalars
            if mapping.count == 1, let first = mapping.first { lower = first.value }
            if lower < 0x80, lower >= 97, lower <= 122 {
                emit(latinPrimary(Int(lower - 97)), commonSecondary, tertiary)
            } else if let letter = greekAndCyrillic[lower] {
                emit(letter.primary, commonSecondary, lower == 0x3C2 ? variantTertiary : tertiary)
                for mark in letter.marks { emit(0, accentWeight(mark), lowerTertiary) }
            } else {
                emit(otherLetterBase + lower, commonSecondary, tertiary)
            }
        default:
            emit(unassignedBase + v, commonSecondary, lowerTertiary)
        }
    }

    // MARK: ASCII fast path

    /// Compares two ASCII strings without allocating; `nil` when either is not ASCII.
    static func compareASCII(_ a: String, _ b: String) -> Int? {
        var a = a
        var b = b
        return a.withUTF8 { ua in
            b.withUTF8 { ub in compareASCII(ua, ub) }
        }
    }

    static func compareASCII(_ ua: UnsafeBufferPointer<UInt8>, _ ub: UnsafeBufferPointer<UInt8>) -> Int? {
        let table = asciiPrimary
        var i = 0
        var j = 0
        // Primary level.
        while true {
            while i < ua.count, ua[i] < 0x80, table[Int(ua[i])] == 0 { i += 1 }
            while j < ub.count, ub[j] < 0x80, table[Int(ub[j])] == 0 { j += 1 }
            if i == ua.count || j == ub.count {
                if i < ua.count { return ua[i] < 0x80 ? 1 : nil }
                if j < ub.count { return ub[j] < 0x80 ? -1 : nil }
                break
            }
            let ca = ua[i]
            let cb = ub[j]
            guard ca < 0x80, cb < 0x80 else { return nil }
            let pa = table[Int(ca)]
            let pb = table[Int(cb)]
            if pa != pb { return pa < pb ? -1 : 1 }
            i += 1
            j += 1
        }
        // Secondary level: ASCII has no accents. Tertiary level: lowercase before uppercase.
        i = 0
        j = 0
        while true {
            while i < ua.count, table[Int(ua[i])] == 0 { i += 1 }
            while j < ub.count, table[Int(ub[j])] == 0 { j += 1 }
            if i == ua.count || j == ub.count { return 0 }
            let upperA = ua[i] >= 65 && ua[i] <= 90
            let upperB = ub[j] >= 65 && ub[j] <= 90
            if upperA != upperB { return upperA ? 1 : -1 }
            i += 1
            j += 1
        }
    }
}

/// A precomputed sort key of a string under ``CoatyCollation``: keys compare as their strings do.
public struct CollationSortKey: Sendable, Hashable, Comparable {
    /// The weights: primary, separator, secondary, separator, tertiary.
    let weights: [UInt32]

    /// Three-way comparison.
    /// - Parameter other: the other key.
    /// - Returns: -1, 0 or 1.
    public func compare(to other: CollationSortKey) -> Int {
        let n = Swift.min(weights.count, other.weights.count)
        var i = 0
        while i < n {
            let a = weights[i]
            let b = other.weights[i]
            if a != b { return a < b ? -1 : 1 }
            i += 1
        }
        return weights.count == other.weights.count ? 0 : (weights.count < other.weights.count ? -1 : 1)
    }

    /// Whether `lhs` sorts before `rhs`.
    public static func < (lhs: CollationSortKey, rhs: CollationSortKey) -> Bool {
        lhs.compare(to: rhs) < 0
    }
}
