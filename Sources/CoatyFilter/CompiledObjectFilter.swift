public import CoatyModel

/// An ``ObjectFilter`` prepared once for matching, ordering and paging many objects.
///
/// Compiling splits property paths, builds LIKE automata and collation keys of string operands
/// once, so matching an object does no string splitting or pattern parsing.
///
/// ```swift
/// let compiled = CompiledObjectFilter(ObjectFilter.where("name", .like("Light%")).take(10))
/// let lights = compiled.apply(to: objects)
/// let isLight = compiled.matches(object)
/// ```
public struct CompiledObjectFilter: Sendable {
    /// The filter this was compiled from.
    public let filter: ObjectFilter
    private let predicate: CompiledConditions
    private let ordering: [(path: PropertyPath, descending: Bool)]

    /// Compiles `filter`.
    /// - Parameter filter: the filter; its conditions, ordering and paging are all used.
    public init(_ filter: ObjectFilter) {
        self.filter = filter
        predicate = CompiledConditions(filter.conditions)
        ordering = (filter.orderByProperties ?? []).map { (PropertyPath($0.property), $0.order == .descending) }
    }

    /// Compiles the conditions of a context filter (no ordering or paging).
    /// - Parameter contextFilter: the context filter.
    public init(_ contextFilter: ContextFilter) {
        self.init(ObjectFilter(conditions: contextFilter.conditions))
    }

    /// Whether `object` satisfies the filter's conditions (ordering and paging do not apply).
    /// - Parameter object: the object; `nil` never matches.
    /// - Returns: `true` on a match.
    public func matches(_ object: JSONValue?) -> Bool {
        guard let object else { return false }
        return predicate.matches(object)
    }

    /// Filters, orders, skips and takes, in that order, as Coaty JS's in-memory database does.
    ///
    /// One difference: where Coaty JS's matcher throws a TypeError on an object (see
    /// ``ObjectMatcher``), Coaty JS fails the whole query; here that object does not match and the
    /// others are still returned.
    /// - Parameter objects: the candidate objects.
    /// - Returns: the matching objects, ordered and paged.
    public func apply(to objects: [JSONValue]) -> [JSONValue] {
        apply(to: objects, json: { $0 })
    }

    /// Filters, orders, skips and takes items that are represented by a JSON value each.
    /// - Parameters:
    ///   - items: the candidate items, e.g. stored records.
    ///   - json: the JSON object of an item; called once per item.
    /// - Returns: the matching items, ordered and paged.
    public func apply<Item>(to items: [Item], json: (Item) throws -> JSONValue) rethrows -> [Item] {
        var selected: [(item: Item, json: JSONValue)] = []
        for item in items {
            let value = try json(item)
            if predicate.matches(value) { selected.append((item, value)) }
        }
        var order = Array(selected.indices)
        if !ordering.isEmpty {
            let keys = selected.map { entry in ordering.map { SortValue(entry.json, at: $0.path) } }
            order = StableSort.sorted(order) { a, b in
                for (level, criterion) in ordering.enumerated() {
                    let result =
                        criterion.descending
                        ? SortValue.compare(keys[b][level], keys[a][level])
                        : SortValue.compare(keys[a][level], keys[b][level])
                    if result != 0 { return result }
                }
                return 0
            }
        }
        let range = Self.page(count: order.count, skip: filter.skip, take: filter.take)
        return order[range].map { selected[$0].item }
    }

    /// The index range that skip and take select from `count` ordered objects.
    ///
    /// As in Coaty JS, a take of 0 (or none) is unlimited and a negative take selects nothing;
    /// a negative skip counts as 0.
    static func page(count: Int, skip: Int?, take: Int?) -> Range<Int> {
        let start = Swift.min(Swift.max(skip ?? 0, 0), count)
        guard let take, take != 0 else { return start..<count }
        if take < 0 { return start..<start }
        let end = take >= count - start ? count : start + take
        return start..<end
    }
}

// MARK: - Paths

/// A property path split once, with array indexes parsed.
struct PropertyPath: Sendable {
    struct Segment: Sendable {
        let key: String
        /// The index when `key` is a canonical array index ("0", "17", not "01").
        let index: Int?
        let isLength: Bool
    }

    let segments: [Segment]

    init(_ property: ObjectFilterProperty) {
        segments = property.path.map { key in
            Segment(key: key, index: Self.arrayIndex(key), isLength: key == "length")
        }
    }

    static func arrayIndex(_ key: String) -> Int? {
        let utf8 = key.utf8
        guard let first = utf8.first, utf8.count <= 10 else { return nil }
        if first == UInt8(ascii: "0") { return utf8.count == 1 ? 0 : nil }
        var value = 0
        for c in utf8 {
            guard c >= 48 && c <= 57 else { return nil }
            value = value * 10 + Int(c - 48)
        }
        return value < 4_294_967_295 ? value : nil
    }

    /// The value at this path; `nil` (JavaScript `undefined`) when a step does not exist or an
    /// intermediate value is not an object or array. Arrays take index steps and `length`.
    func value(in root: JSONValue) -> JSONValue? {
        if segments.count == 1, case .object(let o) = root {
            // The common case: a top-level key.
            let key = segments[0].key
            for i in o.keys.indices where o.keys[i] == key { return o.values[i] }
            return nil
        }
        var current = root
        for segment in segments {
            switch current {
            case .object(let o):
                guard let next = o[segment.key] else { return nil }
                current = next
            case .array(let a):
                if let i = segment.index {
                    guard i < a.count else { return nil }
                    current = a[i]
                } else if segment.isLength {
                    current = .int(Int64(a.count))
                } else {
                    return nil
                }
            default:
                return nil
            }
        }
        return current
    }
}

// MARK: - Conditions

struct CompiledConditions: Sendable {
    enum Combination: Sendable {
        case all
        case and
        case or
    }

    let combination: Combination
    let conditions: [CompiledCondition]

    init(_ conditions: ObjectFilterConditions?) {
        switch conditions {
        case nil:
            combination = .all
            self.conditions = []
        case .condition(let c):
            combination = .and
            self.conditions = [CompiledCondition(c)]
        case .and(let list):
            combination = .and
            self.conditions = list.map(CompiledCondition.init)
        case .or(let list):
            combination = .or
            self.conditions = list.map(CompiledCondition.init)
        }
    }

    func matches(_ object: JSONValue) -> Bool {
        switch combination {
        case .all: return true
        case .and:
            // Coaty JS: conditions.every(…); a condition that throws fails the whole filter.
            for i in conditions.indices where conditions[i].matches(object) != true { return false }
            return true
        case .or:
            // Coaty JS: conditions.some(…); a throw before a true condition fails the whole filter.
            for i in conditions.indices {
                switch conditions[i].matches(object) {
                case true?: return true
                case false?: continue
                case nil: return false
                }
            }
            return false
        }
    }
}

/// A string operand with its collation key computed once.
struct CollatedString: Sendable {
    let string: String
    let key: CollationSortKey
    let isASCII: Bool

    init(_ string: String) {
        self.string = string
        key = CoatyCollation.sortKey(string)
        isASCII = string.utf8.allSatisfy { $0 < 0x80 }
    }

    /// `CoatyCollation.compare(value, self.string)`.
    func compare(_ value: String) -> Int {
        if isASCII, let result = CoatyCollation.compareASCII(value, string) { return result }
        return CoatyCollation.sortKey(value).compare(to: key)
    }
}

struct CompiledCondition: Sendable {
    /// Tests a defined property value; `nil` where Coaty JS throws a TypeError.
    typealias Test = @Sendable (JSONValue) -> Bool?

    let path: PropertyPath
    /// NotExists: the only operator that is true on an undefined value.
    let isNotExists: Bool
    let test: Test

    init(_ condition: ObjectFilterCondition) {
        path = PropertyPath(condition.property)
        let e = condition.expression
        isNotExists = e.operator == .notExists
        test = Self.compile(e)
    }

    /// Whether the condition holds; `nil` where Coaty JS throws a TypeError.
    @inline(__always)
    func matches(_ object: JSONValue) -> Bool? {
        guard let value = path.value(in: object) else { return isNotExists }
        if isNotExists { return false }
        return test(value)
    }

    private static func compile(_ e: ObjectFilterExpression) -> Test {
        let operand = e.operand1
        switch e.operator {
        case .exists, .notExists:
            return { _ in true }
        case .lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual:
            return relational(e.operator, operand)
        case .between, .notBetween:
            return between(negated: e.operator == .notBetween, operand, e.operand2)
        case .like:
            guard case .string(let p)? = operand else { return { _ in false } }
            let pattern = LikePattern(p)
            return { value in
                guard case .string(let s) = value else { return false }
                return pattern.matches(s)
            }
        case .equals, .notEquals:
            let negated = e.operator == .notEquals
            guard let operand else { return { _ in negated } }
            switch operand {
            case .int, .double:
                let number = operand
                return { value in value.isNumber ? ((value == number) != negated) : negated }
            case .string(let string):
                return { value in
                    guard case .string(let s) = value else { return negated }
                    return JavaScript.sameCodeUnits(s, string) != negated
                }
            case .bool(let bool):
                return { value in (value.boolValue == bool) != negated }
            default:
                return { value in JavaScript.deepEquals(value, operand) != negated }
            }
        case .contains, .notContains:
            let negated = e.operator == .notContains
            return { value in
                guard let contained = try? JavaScript.deepContains(value, operand) else { return nil }
                return contained != negated
            }
        case .in, .notIn:
            // A non-array operand makes Coaty JS throw a TypeError.
            guard case .array(let elements)? = operand else { return { _ in nil } }
            let negated = e.operator == .notIn
            // Split the candidates by kind once; a value is only ever equal to one of its own kind.
            var strings: [String] = []
            var numbers: [JSONValue] = []
            var bools: Set<Bool> = []
            var hasNull = false
            var composites: [JSONValue] = []
            for element in elements {
                switch element {
                case .string(let s): strings.append(s)
                case .int, .double: numbers.append(element)
                case .bool(let b): bools.insert(b)
                case .null: hasNull = true
                case .array, .object: composites.append(element)
                }
            }
            return { [strings, numbers, bools, hasNull, composites] value in
                let found: Bool
                switch value {
                case .string(let s): found = strings.contains { JavaScript.sameCodeUnits($0, s) }
                case .int, .double: found = numbers.contains { $0 == value }
                case .bool(let b): found = bools.contains(b)
                case .null: found = hasNull
                case .array, .object: found = composites.contains { JavaScript.deepEquals($0, value) }
                }
                return found != negated
            }
        }
    }

    private static func relational(_ op: ObjectFilterOperator, _ operand: JSONValue?) -> Test {
        let collated = operand?.stringValue.map(CollatedString.init)
        let jsCompare: @Sendable (JSONValue?, JSONValue?) -> Bool
        let fromCollation: @Sendable (Int) -> Bool
        switch op {
        case .lessThan:
            jsCompare = JavaScript.less
            fromCollation = { $0 < 0 }
        case .lessThanOrEqual:
            jsCompare = JavaScript.lessOrEqual
            fromCollation = { $0 <= 0 }
        case .greaterThan:
            jsCompare = JavaScript.greater
            fromCollation = { $0 > 0 }
        default:
            jsCompare = JavaScript.greaterOrEqual
            fromCollation = { $0 >= 0 }
        }
        if case .int(let n)? = operand {
            // The common numeric case without JavaScript conversions.
            return { value in
                if case .int(let v) = value {
                    switch op {
                    case .lessThan: return v < n
                    case .lessThanOrEqual: return v <= n
                    case .greaterThan: return v > n
                    default: return v >= n
                    }
                }
                return jsCompare(value, operand)
            }
        }
        return { value in
            if let collated, case .string(let s) = value { return fromCollation(collated.compare(s)) }
            return jsCompare(value, operand)
        }
    }

    private static func between(negated: Bool, _ operand1: JSONValue?, _ operand2: JSONValue?) -> Test {
        var strings: (CollatedString, CollatedString)?
        if case .string(let a)? = operand1, case .string(let b)? = operand2 {
            strings =
                CoatyCollation.compare(a, b) > 0
                ? (CollatedString(b), CollatedString(a)) : (CollatedString(a), CollatedString(b))
        }
        // Generic bounds are swapped when operand1 > operand2 in JavaScript.
        let swap = JavaScript.greater(operand1, operand2)
        let lower = swap ? operand2 : operand1
        let upper = swap ? operand1 : operand2
        let stringBounds = strings
        return { value in
            if let (lo, hi) = stringBounds, case .string(let s) = value {
                let inside = lo.compare(s) >= 0 && hi.compare(s) <= 0
                return inside != negated
            }
            if negated {
                return JavaScript.less(value, lower) || JavaScript.greater(value, upper)
            }
            return JavaScript.greaterOrEqual(value, lower) && JavaScript.lessOrEqual(value, upper)
        }
    }
}

// MARK: - Ordering

/// One ordering value of an object, prepared for Coaty JS's ordering comparer.
enum SortValue: Sendable {
    case undefined
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case string(String, CollationSortKey)
    case other(JSONValue)

    init(_ object: JSONValue, at path: PropertyPath) {
        switch path.value(in: object) {
        case nil: self = .undefined
        case .int(let i)?: self = .int(i)
        case .double(let d)?: self = .double(d)
        case .bool(let b)?: self = .bool(b)
        case .string(let s)?: self = .string(s, CoatyCollation.sortKey(s))
        case let value?: self = .other(value)
        }
    }

    var json: JSONValue? {
        switch self {
        case .undefined: nil
        case .int(let i): .int(i)
        case .double(let d): .double(d)
        case .bool(let b): .bool(b)
        case .string(let s, _): .string(s)
        case .other(let v): v
        }
    }

    /// Coaty JS's comparer: equal primitives 0; strings by collation; numbers numerically;
    /// false < true; undefined first; otherwise JavaScript `<`.
    static func compare(_ x: SortValue, _ y: SortValue) -> Int {
        switch (x, y) {
        case (.int(let i), .int(let j)):
            return i == j ? 0 : (i < j ? -1 : 1)
        case (.double(let a), .double(let b)):
            return a < b ? -1 : (a > b ? 1 : 0)
        case (.int(let i), .double(let b)):
            let a = Double(i)
            return a < b ? -1 : (a > b ? 1 : 0)
        case (.double(let a), .int(let j)):
            let b = Double(j)
            return a < b ? -1 : (a > b ? 1 : 0)
        case (.bool(let a), .bool(let b)):
            return a == b ? 0 : (a ? 1 : -1)
        case (.string(let a, let ka), .string(let b, let kb)):
            if JavaScript.sameCodeUnits(a, b) { return 0 }
            return ka.compare(to: kb)
        case (.undefined, .undefined):
            return 0
        case (.undefined, _):
            return -1
        case (_, .undefined):
            return 1
        default:
            let a = x.json
            let b = y.json
            if JavaScript.strictEquals(a, b) { return 0 }
            return JavaScript.less(a, b) ? -1 : 1
        }
    }
}

/// The sort of JavaScript's `Array.prototype.sort` in V8 (TimSort), on a three-way comparator.
///
/// Runs are found and extended by binary insertion sort exactly as V8 does, then merged stably.
/// For a consistent comparator the result is that of any stable sort; for an inconsistent one
/// (Coaty JS's ordering comparer on mixed types) arrays of fewer than 64 elements come out in
/// V8's very order. It never traps, whatever the comparator answers.
enum StableSort {
    static func sorted<T>(_ input: [T], by compare: (T, T) -> Int) -> [T] {
        var a = input
        let n = a.count
        guard n >= 2 else { return a }
        let minRun = minimumRunLength(n)
        var runs: [(start: Int, count: Int)] = []
        var low = 0
        var remaining = n
        while remaining != 0 {
            var runLength = countAndMakeRun(&a, low, low + remaining, compare)
            if runLength < minRun {
                let forced = Swift.min(minRun, remaining)
                binaryInsertionSort(&a, low, low + runLength, low + forced, compare)
                runLength = forced
            }
            runs.append((low, runLength))
            low += runLength
            remaining -= runLength
        }
        while runs.count > 1 {
            var merged: [(start: Int, count: Int)] = []
            var i = 0
            while i < runs.count {
                if i + 1 < runs.count {
                    merge(&a, runs[i].start, runs[i].count, runs[i + 1].count, compare)
                    merged.append((runs[i].start, runs[i].count + runs[i + 1].count))
                    i += 2
                } else {
                    merged.append(runs[i])
                    i += 1
                }
            }
            runs = merged
        }
        return a
    }

    static func minimumRunLength(_ length: Int) -> Int {
        var n = length
        var r = 0
        while n >= 64 {
            r |= n & 1
            n >>= 1
        }
        return n + r
    }

    /// The length of the run starting at `low`; a strictly descending run is reversed in place.
    static func countAndMakeRun<T>(_ a: inout [T], _ low: Int, _ high: Int, _ compare: (T, T) -> Int) -> Int {
        let next = low + 1
        if next == high { return 1 }
        var runLength = 2
        let isDescending = compare(a[next], a[low]) < 0
        var previous = next
        var index = next + 1
        while index < high {
            let order = compare(a[index], a[previous])
            if isDescending ? order >= 0 : order < 0 { break }
            previous = index
            runLength += 1
            index += 1
        }
        if isDescending { a[low..<(low + runLength)].reverse() }
        return runLength
    }

    /// Sorts `a[low..<high]`, whose prefix up to `start` is sorted, by binary insertion.
    static func binaryInsertionSort<T>(_ a: inout [T], _ low: Int, _ start: Int, _ high: Int, _ compare: (T, T) -> Int)
    {
        var start = low == start ? start + 1 : start
        while start < high {
            var left = low
            var right = start
            let pivot = a[start]
            while left < right {
                let mid = left + ((right - left) >> 1)
                if compare(pivot, a[mid]) < 0 { right = mid } else { left = mid + 1 }
            }
            var p = start
            while p > left {
                a[p] = a[p - 1]
                p -= 1
            }
            a[left] = pivot
            start += 1
        }
    }

    /// Merges the adjacent sorted ranges `a[start..<start+count1]` and the `count2` elements after it.
    static func merge<T>(_ a: inout [T], _ start: Int, _ count1: Int, _ count2: Int, _ compare: (T, T) -> Int) {
        let left = Array(a[start..<(start + count1)])
        var i = 0
        var j = start + count1
        let end = j + count2
        var k = start
        while i < left.count && j < end {
            if compare(a[j], left[i]) < 0 {
                a[k] = a[j]
                j += 1
            } else {
                a[k] = left[i]
                i += 1
            }
            k += 1
        }
        while i < left.count {
            a[k] = left[i]
            i += 1
            k += 1
        }
    }
}
