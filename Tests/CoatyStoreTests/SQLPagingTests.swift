import CoatyCore
import CoatyRecording
import CoatyStore
import Testing

@Suite("Paging pushed into SQL")
struct SQLPagingTests {
    @Test("exactSQLPaging: skip and take as Coaty pages them; nothing pushed for ordering or a negative take")
    func paging() {
        #expect(ObjectFilter().exactSQLPaging! == (0, nil))
        #expect(ObjectFilter().skip(5).exactSQLPaging! == (5, nil))
        #expect(ObjectFilter().take(3).exactSQLPaging! == (0, 3))
        #expect(ObjectFilter().skip(-2).take(0).exactSQLPaging! == (0, nil))
        #expect(ObjectFilter().take(-1).exactSQLPaging == nil)
        var ordered = ObjectFilter().take(3)
        ordered.orderByProperties = [ObjectFilterOrdering("name")]
        #expect(ordered.exactSQLPaging == nil)
        ordered.orderByProperties = []
        #expect(ordered.exactSQLPaging! == (0, 3))
    }

    @Test("Numbers SQL may compare: finite and below 2^53 in magnitude; comparison operators")
    func numbersAndComparisons() {
        #expect(JSONValue.int(9_007_199_254_740_991).isExactSQLNumber)
        #expect(!JSONValue.int(9_007_199_254_740_992).isExactSQLNumber)
        #expect(!JSONValue.int(-9_007_199_254_740_992).isExactSQLNumber)
        #expect(JSONValue.double(-21.5).isExactSQLNumber)
        #expect(!JSONValue.double(.infinity).isExactSQLNumber)
        #expect(!JSONValue.double(.nan).isExactSQLNumber)
        #expect(!JSONValue.string("1").isExactSQLNumber)
        let comparisons = ObjectFilterOperator.allCases.compactMap { op in op.sqlComparison.map { (op, $0) } }
        #expect(comparisons.map(\.1) == ["<", "<=", ">", ">="])
        #expect(
            comparisons.map(\.0) == [.lessThan, .lessThanOrEqual, .greaterThan, .greaterThanOrEqual]
        )
    }
}
